//! The payments example on PostgreSQL, in process: a client that disconnects
//! while its debit's transaction waits on a lock leaves no transaction open,
//! and the debit happens once.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use idem_core::Engine;
use idem_examples::payments::{router, App, PgLedger};
use idem_tests::{pg_store, serve};
use sqlx::AssertSqlSafe;

async fn idle_in_transaction(pool: &sqlx::PgPool, schema: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND state LIKE 'idle in transaction%' AND query LIKE '%' || $1 || '%'",
    )
    .bind(schema)
    .fetch_one(pool)
    .await
    .expect("pg_stat_activity")
}

/// Polls until the backends running a statement on `schema` that match
/// `condition` (on `pg_stat_activity`) number `wanted` (`Some(0)`: none) or,
/// with `None`, at least one; five seconds at most.
async fn until_backends(pool: &sqlx::PgPool, schema: &str, condition: &str, wanted: Option<i64>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND {condition} AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()"
        )))
        .bind(schema)
        .fetch_one(pool)
        .await
        .expect("pg_stat_activity");
        let reached = match wanted {
            Some(w) => n == w,
            None => n > 0,
        };
        assert!(
            reached || std::time::Instant::now() < deadline,
            "{condition}: {n} backends"
        );
        if reached {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_gone_mid_transaction_leaves_nothing_open_and_debits_once() {
    let store = pg_store().await;
    let schema = store.schema().to_owned();
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger table");
    let pool = store.pool().clone();
    let url = serve(router(App {
        engine: Engine::new(store),
        ledger: Arc::new(ledger),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await;
    let c = reqwest::Client::new();
    let debit = |timeout: Duration| {
        c.post(format!("{url}/accounts/kim/debits"))
            .header("idempotency-key", "gone-1")
            .header(header::CONTENT_TYPE, "application/json")
            .body(r#"{"amount":1000}"#)
            .timeout(timeout)
            .send()
    };
    // Open the account, then hold its row lock from another transaction.
    let balance = c
        .get(format!("{url}/accounts/kim"))
        .send()
        .await
        .expect("get");
    assert_eq!(balance.status(), StatusCode::OK);
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO \"{schema}\".accounts (id, balance) VALUES ('kim', 10000) ON CONFLICT DO NOTHING"
    )))
    .execute(&pool)
    .await
    .expect("account");
    let mut blocker = pool.begin().await.expect("blocker");
    sqlx::query(AssertSqlSafe(format!(
        "SELECT 1 FROM \"{schema}\".accounts WHERE id = 'kim' FOR UPDATE"
    )))
    .execute(&mut *blocker)
    .await
    .expect("lock the row");

    // The client gives up while the debit waits on the lock.
    assert!(
        debit(Duration::from_millis(400)).await.is_err(),
        "the client timed out"
    );
    // The debit's statement is waiting on the lock, its client gone.
    until_backends(&pool, &schema, "wait_event_type = 'Lock'", None).await;
    blocker.rollback().await.expect("unlock");
    // Until no statement on the schema is running any more, and the dropped
    // debit's transaction is rolled back: its statement ends when the lock is
    // released, and the rollback follows a moment later. A transaction left
    // open stays "idle in transaction" and fails here after five seconds.
    until_backends(&pool, &schema, "state = 'active'", Some(0)).await;
    until_backends(&pool, &schema, "state LIKE 'idle in transaction%'", Some(0)).await;
    // The retry gets one debit: the first one's, replayed, or its own.
    let retry = debit(Duration::from_secs(10)).await.expect("retry");
    assert_eq!(
        retry.status(),
        StatusCode::CREATED,
        "{:?}",
        retry.text().await
    );
    let again = debit(Duration::from_secs(10)).await.expect("replay");
    assert!(again.headers().contains_key("idempotent-replayed"));
    let v: serde_json::Value = c
        .get(format!("{url}/accounts/kim"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(v["balance"], 9000, "exactly one debit");
    assert_eq!(
        idle_in_transaction(&pool, &schema).await,
        0,
        "no transaction left open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_starting_at_once_all_come_up() {
    let store = pg_store().await;
    let starts = (0..4).map(|_| {
        let ledger = PgLedger::new(store.clone());
        let store = store.clone();
        async move {
            store.migrate().await.map_err(|e| e.to_string())?;
            ledger.migrate().await.map_err(|e| e.to_string())
        }
    });
    for started in futures_util::future::join_all(starts).await {
        started.expect("every instance's migration succeeds");
    }
}

#[tokio::test]
async fn an_amount_beyond_the_ledger_is_refused_not_recorded_as_a_wrong_answer() {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger table");
    let url = serve(router(App {
        engine: Engine::new(store),
        ledger: Arc::new(ledger),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await;
    let r = reqwest::Client::new()
        .post(format!("{url}/accounts/lee/debits"))
        .header("idempotency-key", "huge")
        .header(header::CONTENT_TYPE, "application/json")
        .body(r#"{"amount":9223372036854775808}"#)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let problem: serde_json::Value = r.json().await.expect("problem");
    assert_eq!(problem["type"], "urn:payments:problem:bad-amount");
}
