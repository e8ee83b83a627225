//! The payments example on a MariaDB of the test's own, under load and
//! faults: the server killed and restarted, every connection killed, the
//! accounts table locked past the lock wait timeout. Every key ends with its
//! debit (0 lost), no account is debited twice (0 double), every retry of a
//! finished key answers its first receipt, and every answer on the way was a
//! 409 or 503 in problem+json.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, StatusCode};
use idem_core::{Engine, Policy};
use idem_examples::mysql_ledger::MySqlLedger;
use idem_examples::payments::{router, App};
use idem_mysql::MySqlStore;
use idem_tests::{serve, PrivateMariaDb};
use sqlx::AssertSqlSafe;

const KEYS: usize = 240;
const CLIENTS: usize = 8;
const ACCOUNTS: usize = 4;

/// What the clients saw on the way: status and content type of every answer
/// that was not final.
#[derive(Default)]
struct Seen {
    transient: Mutex<BTreeMap<(u16, String), usize>>,
    done: AtomicUsize,
}

/// Sends `key`'s debit until it is answered 201; returns the receipt.
async fn debit_until_final(c: &reqwest::Client, url: &str, key: usize, seen: &Seen) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "key {key} lost: no debit within 90 s"
        );
        let sent = c
            .post(format!("{url}/accounts/acct{}/debits", key % ACCOUNTS))
            .header("idempotency-key", format!("debit-{key}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(r#"{"amount":1}"#)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let Ok(answer) = sent else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let status = answer.status();
        let kind = answer
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = answer.text().await.unwrap_or_default();
        if status == StatusCode::CREATED {
            return body;
        }
        *seen
            .transient
            .lock()
            .expect("seen")
            .entry((status.as_u16(), kind))
            .or_default() += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn until_done(seen: &Seen, n: usize) {
    let deadline = Instant::now() + Duration::from_mins(2);
    while seen.done.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "the load stalled before {n} keys"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Kills every connection of the server but the returned pool's.
async fn kill_every_connection(db_url: &str) -> sqlx::MySqlPool {
    let admin = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(db_url)
        .await
        .expect("admin");
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT ID FROM information_schema.PROCESSLIST \
         WHERE ID <> CONNECTION_ID() AND USER = 'root' AND COMMAND <> 'Daemon'",
    )
    .fetch_all(&admin)
    .await
    .expect("processlist");
    let mut admin_conn = admin.acquire().await.expect("admin connection");
    let own: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut *admin_conn)
        .await
        .expect("id");
    for id in ids
        .into_iter()
        .filter(|id| u64::try_from(*id).ok() != Some(own))
    {
        let _ = sqlx::query(AssertSqlSafe(format!("KILL {id}")))
            .execute(&mut *admin_conn)
            .await;
    }
    drop(admin_conn);
    admin
}

/// Locks every account past the lock wait timeout (1 s), until a debit has
/// been refused for it.
async fn lock_accounts_until_a_debit_is_refused(admin: &sqlx::MySqlPool, seen: &Seen) {
    let refused_before: usize = seen.transient.lock().expect("seen").values().sum();
    let mut locker = admin.begin().await.expect("locker");
    sqlx::query("SELECT id FROM accounts FOR UPDATE")
        .execute(&mut *locker)
        .await
        .expect("lock the accounts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.transient.lock().expect("seen").values().sum::<usize>() == refused_before {
        assert!(
            Instant::now() < deadline,
            "no debit was refused while the accounts were locked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    locker.rollback().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debits_through_a_restart_killed_connections_and_a_locked_table_happen_once() {
    let db = PrivateMariaDb::start();
    let db_url = db.url();
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect(&db_url)
        .await
        .expect("pool");
    let store = MySqlStore::new(pool)
        .with_table("idem_records")
        .expect("name");
    store.migrate().await.expect("migrate");
    let ledger = MySqlLedger::new(store.clone(), "accounts");
    ledger.migrate().await.expect("ledger");
    let url = serve(router(App {
        engine: Engine::new(store.clone())
            .with_policy(Policy::default().lease(Duration::from_secs(2))),
        ledger: Arc::new(ledger),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await;

    let seen = Arc::new(Seen::default());
    let c = reqwest::Client::new();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (c, url, seen) = (c.clone(), url.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                let mut receipts = Vec::new();
                for key in (i..KEYS).step_by(CLIENTS) {
                    receipts.push((key, debit_until_final(&c, &url, key, &seen).await));
                    seen.done.fetch_add(1, Ordering::SeqCst);
                }
                receipts
            })
        })
        .collect();

    // A quarter in: the server dies (SIGKILL) and comes back.
    until_done(&seen, KEYS / 4).await;
    let db = tokio::task::spawn_blocking(move || {
        let mut db = db;
        db.restart();
        db
    })
    .await
    .expect("restart");

    // Half way: every connection the service holds is killed.
    until_done(&seen, KEYS / 2).await;
    let admin = kill_every_connection(&db_url).await;

    // Three quarters in: the accounts are locked past the lock wait
    // timeout (1 s), until some debit has been refused for it.
    until_done(&seen, 3 * KEYS / 4).await;
    lock_accounts_until_a_debit_is_refused(&admin, &seen).await;

    let mut receipts = BTreeMap::new();
    for client in clients {
        receipts.extend(client.await.expect("client"));
    }
    assert_eq!(receipts.len(), KEYS, "0 lost: every key has its debit");

    // 0 double: the accounts hold exactly one debit per key.
    let debited: i64 =
        sqlx::query_scalar("SELECT CAST(SUM(10000 - balance) AS SIGNED) FROM accounts")
            .fetch_one(&admin)
            .await
            .expect("balances");
    assert_eq!(
        debited,
        i64::try_from(KEYS).expect("keys"),
        "one debit per key"
    );

    // Each key's retry answers its first receipt, byte for byte.
    for (key, receipt) in receipts.iter().step_by(7) {
        let again = c
            .post(format!("{url}/accounts/acct{}/debits", key % ACCOUNTS))
            .header("idempotency-key", format!("debit-{key}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(r#"{"amount":1}"#)
            .send()
            .await
            .expect("replay");
        assert!(again.headers().contains_key("idempotent-replayed"));
        assert_eq!(&again.text().await.expect("body"), receipt);
    }

    let transient = seen.transient.lock().expect("seen").clone();
    eprintln!("answers on the way: {transient:?}");
    assert!(!transient.is_empty(), "the faults were felt");
    for ((status, kind), n) in &transient {
        assert!(
            (*status == 409 || *status == 503) && kind == "application/problem+json",
            "{n} answers of {status} {kind}: only 409 and 503 problem+json on the way ({transient:?})"
        );
    }
    drop(db);
}
