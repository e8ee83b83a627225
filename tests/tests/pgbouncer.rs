//! PostgreSQL through PgBouncer in transaction pooling mode, as production
//! often reaches it: a server connection serves one transaction of one
//! client, then another client's. The store runs unnamed statements there
//! (`PgStore::behind_transaction_pooler`) and listens on a direct
//! connection. The conformance kit, the payments example, and a PgBouncer
//! killed and restarted while debits run: none lost, none doubled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use idem_core::{Engine, Policy};
use idem_examples::payments::{router, App, PgLedger};
use idem_tests::{serve, store_through, Payments, PrivatePgBouncer};
use serde_json::Value;

idem_core::store_conformance_tests!(idem_tests::pgbouncer_store);

/// Debits in the restart test.
const KEYS: usize = 60;

/// The payments example through the PgBouncer at `bouncer_url`, each debit
/// taking `debit_delay`, claims leased for a second (a debit whose COMMIT's
/// answer was lost with PgBouncer keeps its claim until then).
async fn payments_through(
    bouncer_url: &str,
    debit_delay: Duration,
) -> (String, idem_postgres::PgStore) {
    let store = store_through(bouncer_url).await;
    let ledger = PgLedger::new(store.clone());
    ledger
        .migrate()
        .await
        .expect("ledger table through PgBouncer");
    let url = serve(router(App {
        engine: Engine::new(store.clone())
            .with_policy(Policy::default().lease(Duration::from_secs(1))),
        ledger: Arc::new(ledger),
        debit_delay,
        provider: None,
    }))
    .await;
    (url, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_64_duplicates_debit_once_and_a_retry_replays_the_receipt() {
    let (url, _store) = payments_through(&idem_tests::pgbouncer_url(), Duration::ZERO).await;
    let client = payments(&url);
    let answers =
        futures_util::future::join_all((0..64).map(|_| client.try_debit_json("ann", "dup-1", 100)))
            .await;
    let mut receipts = Vec::new();
    for answer in answers {
        let (status, body) = answer.expect("an answer");
        assert!(
            status == StatusCode::CREATED || status == StatusCode::CONFLICT,
            "{status} {body}"
        );
        if status == StatusCode::CREATED {
            receipts.push(body["debit_id"].clone());
        }
    }
    receipts.dedup();
    assert_eq!(receipts.len(), 1, "one receipt: {receipts:?}");
    let (status, retry) = client
        .try_debit_json("ann", "dup-1", 100)
        .await
        .expect("retry");
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(retry["debit_id"], receipts[0]);
    assert_eq!(client.balance("ann").await, 9900);
}

/// Every logical debit is retried with its key until it gets a final
/// answer (201 or 4xx), while the PgBouncer in front of the database is
/// killed and restarted twice, the first time while debits wait inside
/// their transactions (on a row lock held from a direct connection). Each
/// debit happens once: the balance is exactly the opening balance less one
/// amount per key, and every key's answers name one debit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pgbouncer_killed_and_restarted_mid_load_loses_no_debit_and_doubles_none() {
    let mut bouncer = PrivatePgBouncer::start();
    let (url, store) = payments_through(&bouncer.url(), Duration::from_millis(100)).await;
    let client = payments(&url);
    let (status, _) = client
        .try_debit_json("bea", "opening", 100)
        .await
        .expect("opening debit");
    assert_eq!(status, StatusCode::CREATED);
    // Debits of `bea` will wait on this lock inside their transactions.
    let direct = idem_tests::pg_pool(1).await;
    let mut blocker = direct.begin().await.expect("blocker");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT 1 FROM \"{}\".accounts WHERE id = 'bea' FOR UPDATE",
        store.schema()
    )))
    .execute(&mut *blocker)
    .await
    .expect("lock bea");
    // What the load has seen so far, for the fault schedule to wait on.
    let counts = Arc::new(Counts::default());
    let load = {
        let (client, counts) = (client.clone(), Arc::clone(&counts));
        tokio::spawn(async move {
            let mut receipts: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            let mut unavailable = 0;
            for batch in 0..KEYS / 6 {
                let keys: Vec<String> = (0..6).map(|i| format!("restart-{batch}-{i}")).collect();
                let done = futures_util::future::join_all(keys.iter().map(|key| {
                    let (client, counts) = (client.clone(), Arc::clone(&counts));
                    async move {
                        let mut seen = Vec::new();
                        let mut refused = 0;
                        for _ in 0..200 {
                            match client.try_debit_json("bea", key, 100).await {
                                Ok((StatusCode::CREATED, body)) => {
                                    counts.created.fetch_add(1, Ordering::SeqCst);
                                    seen.push(body["debit_id"].clone());
                                    return (seen, refused);
                                }
                                Ok((status, body))
                                    if status.is_client_error()
                                        && status != StatusCode::CONFLICT =>
                                {
                                    panic!("{key}: {status} {body}")
                                }
                                // 503 store-unavailable, 409 in flight, or
                                // no answer: retry with the same key.
                                _ => {
                                    counts.refused.fetch_add(1, Ordering::SeqCst);
                                    refused += 1;
                                }
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        panic!("{key}: no final answer after 200 attempts");
                    }
                }))
                .await;
                for (key, (seen, refused)) in keys.into_iter().zip(done) {
                    unavailable += refused;
                    receipts.insert(key, seen);
                }
            }
            (receipts, unavailable)
        })
    };
    faults(&mut bouncer, blocker, &counts, store.schema()).await;
    let (receipts, unavailable) = load.await.expect("load");
    assert_eq!(receipts.len(), KEYS);
    // Each key's retries after the first success replay the same receipt.
    for (key, seen) in &receipts {
        assert_eq!(seen.len(), 1, "{key}: {seen:?}");
        let (status, again) = client
            .try_debit_json("bea", key, 100)
            .await
            .expect("replay");
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(&again["debit_id"], &seen[0], "{key}");
    }
    assert_eq!(
        client.balance("bea").await,
        10_000 - 100 * (u64::try_from(KEYS).unwrap_or(0) + 1),
        "each of {KEYS} debits once ({unavailable} attempts answered while PgBouncer was down)"
    );
    assert!(unavailable > 0, "the restarts happened while debits ran");
}

/// The restart test's faults, each once the load reached the state it is
/// meant for: PgBouncer killed while debits wait on `blocker`'s lock inside
/// their transactions, the lock released and PgBouncer restarted once a
/// debit was refused while it was down, then killed again once debits go
/// through the new one, and restarted once one was refused again.
async fn faults(
    bouncer: &mut PrivatePgBouncer,
    blocker: sqlx::Transaction<'_, sqlx::Postgres>,
    counts: &Counts,
    schema: &str,
) {
    // The first kill, once debits wait on the lock inside their transactions.
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
         AND query LIKE '%{schema}%' AND pid <> pg_backend_pid()"
    );
    let watch = idem_tests::pg_pool(1).await;
    until("debits waiting on the lock", || async {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(waiting.clone()))
            .fetch_one(&watch)
            .await
            .is_ok_and(|n| n > 0)
    })
    .await;
    bouncer.kill();
    // Unlocked and restarted once debits were refused while it was down.
    let refused = counts.refused.load(Ordering::SeqCst);
    until("a debit refused while PgBouncer is down", || async {
        counts.refused.load(Ordering::SeqCst) > refused
    })
    .await;
    blocker.rollback().await.expect("unlock");
    bouncer.restart();
    // Killed again once debits go through the new one, and restarted once
    // a debit was refused again.
    let created = counts.created.load(Ordering::SeqCst);
    until("a debit through the restarted PgBouncer", || async {
        counts.created.load(Ordering::SeqCst) > created
    })
    .await;
    bouncer.kill();
    let refused = counts.refused.load(Ordering::SeqCst);
    until("a debit refused while PgBouncer is down again", || async {
        counts.refused.load(Ordering::SeqCst) > refused
    })
    .await;
    bouncer.restart();
}

/// Attempts the restart test's load has seen answered.
#[derive(Default)]
struct Counts {
    /// Debits answered 201.
    created: AtomicUsize,
    /// Attempts answered 503 or 409, or not at all.
    refused: AtomicUsize,
}

/// Polls `reached` every 10 ms until it is true; fails after 20 s naming
/// `what`.
async fn until<F, Fut>(what: &str, reached: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !reached().await {
        assert!(
            std::time::Instant::now() < deadline,
            "never reached: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A client of the instance at `url` whose requests give up after 5 s.
fn payments(url: &str) -> Payments {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_default();
    Payments::with_client(client, url)
}
