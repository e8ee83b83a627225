//! A holder that lost its claim takes no effect: the payments service's
//! debit lands once when its holder stalls past its lease and a retry on
//! another instance takes over, and when an operator force-removes the
//! record while the debit runs. On memory, Redis and PostgreSQL, each with
//! the balances where the example keeps them, committed with the record.
//!
//! Two instances share one store (two routers in this process). The stall
//! is a holder whose renewals fail (a partition from the store, a frozen
//! renewal task), so that its lease ends while its debit is on the way.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use idem_core::{
    Engine, IdempotencyKey, MemoryStore, Policy, RecordId, RecordInfo, RecordInfoState, Removal,
    Scope, Store,
};
use idem_examples::payments::{router, App, Ledger, MemoryLedger, PgLedger, RedisLedger};
use idem_examples::provider::{provider_router, Charges, Provider, ProviderClient};
use idem_tests::{pg_store, redis_url, serve, unique_prefix, Payments, RenewalsFail};

const LEASE: Duration = Duration::from_millis(300);
/// Longer than the lease: the stalled holder's debit is still on its way
/// when its claim ends.
const PROVIDER: Duration = Duration::from_millis(800);

/// Serves the payments routes: records in `store`, balances in `ledger`.
async fn instance(store: Arc<dyn Store>, ledger: Arc<dyn Ledger>) -> String {
    charging(store, ledger, None).await
}

/// The same, charging each debit through the provider at `provider`.
async fn charging(
    store: Arc<dyn Store>,
    ledger: Arc<dyn Ledger>,
    provider: Option<&str>,
) -> String {
    serve(router(App {
        engine: Engine::from_arc(store).with_policy(Policy::default().lease(LEASE)),
        ledger,
        debit_delay: PROVIDER,
        provider: provider.map(ProviderClient::new),
    }))
    .await
}

/// The payment provider, its charges counted.
async fn provider() -> (String, Charges) {
    let charges = Charges::default();
    let url = serve(provider_router(Provider {
        engine: Engine::new(MemoryStore::new()),
        charges: charges.clone(),
    }))
    .await;
    (url, charges)
}

/// The holder stalls past its lease; the client's retry reaches the other
/// instance, which takes the claim over and debits; the holder resumes.
async fn holder_stalls_past_its_lease(store: &dyn Store, stalling: String, other: String) {
    let first = tokio::spawn(async move {
        Payments::new(stalling.as_str())
            .debit("alice", "stall-1", 100)
            .await
    });
    // The lease ends 300 ms after the claim and is not renewed; the retry
    // comes once the store says so. A retry told the debit is in flight
    // (409) meanwhile retries, as a client would, while the holder is still
    // stalled.
    let id = RecordId::new(
        &Scope::new("alice"),
        &IdempotencyKey::parse("stall-1").expect("key"),
    );
    idem_tests::until_lease_lapsed(store, &id, "the stalled debit").await;
    let stalled_until = tokio::time::Instant::now() + PROVIDER - LEASE;
    let retry = loop {
        let retry = Payments::new(other.as_str())
            .debit("alice", "stall-1", 100)
            .await;
        if retry.status() != StatusCode::CONFLICT || tokio::time::Instant::now() > stalled_until {
            break retry;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(retry.status(), StatusCode::CREATED, "the takeover debits");
    let late = first.await.expect("first request");
    assert_eq!(
        late.status(),
        StatusCode::CONFLICT,
        "the stalled holder is told it lost its claim, and debits nothing"
    );
    let problem = late.text().await.expect("body");
    assert!(problem.contains("lease-lost"), "{problem}");
    assert_eq!(
        Payments::new(other.as_str()).balance("alice").await,
        9_900,
        "one debit of 100"
    );
    // Every later retry replays the takeover's receipt.
    let again = Payments::new(other.as_str())
        .debit("alice", "stall-1", 100)
        .await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(axum::http::HeaderValue::as_bytes),
        Some(&b"true"[..])
    );
    assert_eq!(Payments::new(other.as_str()).balance("alice").await, 9_900);
}

/// An operator force-removes the record while its debit runs; the client's
/// retry debits; the removed holder finishes.
async fn record_force_removed_mid_debit(store: Arc<dyn Store>, url: String) {
    let id = RecordId::new(
        &Scope::new("alice"),
        &IdempotencyKey::parse("forced-1").expect("key"),
    );
    let u = url.clone();
    let first = tokio::spawn(async move {
        Payments::new(u.as_str())
            .debit("alice", "forced-1", 100)
            .await
    });
    // Removed once its debit holds the claim (the provider call takes
    // 800 ms after it).
    let claimed_by = tokio::time::Instant::now() + Duration::from_secs(2);
    while !matches!(
        store.inspect(&id).await.expect("inspect"),
        Some(RecordInfo {
            state: RecordInfoState::InFlight { .. },
            ..
        })
    ) {
        assert!(
            tokio::time::Instant::now() < claimed_by,
            "the debit never took its claim"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        store.remove(&id, true).await.expect("remove"),
        Removal::Removed
    );
    let retry = Payments::new(url.as_str())
        .debit("alice", "forced-1", 100)
        .await;
    assert_eq!(retry.status(), StatusCode::CREATED, "the retry debits");
    let removed = first.await.expect("first request");
    assert_eq!(
        removed.status(),
        StatusCode::CONFLICT,
        "the removed holder's debit is not applied"
    );
    assert_eq!(
        Payments::new(url.as_str()).balance("alice").await,
        9_900,
        "one debit of 100"
    );
}

/// Two instances on `store`, the first stalling, and the stall story.
async fn stalled_and_taken_over(store: Arc<dyn Store>, ledger: Arc<dyn Ledger>) {
    let stalling = instance(
        Arc::new(RenewalsFail::renewals_fail(Arc::clone(&store))),
        Arc::clone(&ledger),
    )
    .await;
    let other = instance(Arc::clone(&store), ledger).await;
    holder_stalls_past_its_lease(&*store, stalling, other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_stalls_past_its_lease_and_a_retry_takes_over_on_memory() {
    let records = MemoryStore::new();
    let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(&records));
    stalled_and_taken_over(Arc::new(records), ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_force_removed_mid_debit_debits_once_on_memory() {
    let records = MemoryStore::new();
    let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(&records));
    let store: Arc<dyn Store> = Arc::new(records);
    let url = instance(Arc::clone(&store), ledger).await;
    record_force_removed_mid_debit(store, url).await;
}

async fn redis_records(prefix: &str) -> (idem_redis::RedisStore, Arc<dyn Ledger>) {
    let store = idem_redis::RedisStore::connect(&redis_url())
        .await
        .expect("redis")
        .with_prefix(&format!("{prefix}idem:"));
    let ledger = RedisLedger::connect(&redis_url(), &store, &format!("{prefix}balance:"))
        .await
        .expect("redis ledger");
    (store, Arc::new(ledger))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_stalls_past_its_lease_and_a_retry_takes_over_on_redis() {
    let (store, ledger) = redis_records(&unique_prefix("stall")).await;
    stalled_and_taken_over(Arc::new(store), ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_force_removed_mid_debit_debits_once_on_redis() {
    let (store, ledger) = redis_records(&unique_prefix("forced")).await;
    let store: Arc<dyn Store> = Arc::new(store);
    let url = instance(Arc::clone(&store), ledger).await;
    record_force_removed_mid_debit(store, url).await;
}

/// On Redis Cluster the balance and the debit's record are in different
/// slots: the debit carries the claim's downstream key, and the ledger
/// applies it once per key. The stalled holder's late debit and the
/// takeover's are one debit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_stalls_past_its_lease_and_a_retry_takes_over_on_redis_cluster() {
    let prefix = unique_prefix("stall-cluster");
    let store = idem_redis::RedisStore::connect_cluster(idem_tests::redis_cluster_nodes())
        .await
        .expect("redis cluster")
        .with_prefix(&format!("{prefix}idem:"));
    let ledger: Arc<dyn Ledger> = Arc::new(
        RedisLedger::connect(&redis_url(), &store, &format!("{prefix}balance:"))
            .await
            .expect("redis ledger"),
    );
    stalled_and_taken_over(Arc::new(store), ledger).await;
}

async fn pg_records() -> (idem_postgres::PgStore, Arc<dyn Ledger>) {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    (store, Arc::new(ledger))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_stalls_past_its_lease_and_a_retry_takes_over_on_postgres() {
    let (store, ledger) = pg_records().await;
    stalled_and_taken_over(Arc::new(store), ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_force_removed_mid_debit_debits_once_on_postgres() {
    let (store, ledger) = pg_records().await;
    let store: Arc<dyn Store> = Arc::new(store);
    let url = instance(Arc::clone(&store), ledger).await;
    record_force_removed_mid_debit(store, url).await;
}

/// Through PgBouncer in transaction mode: the debit commits with its record
/// in one transaction, on statements with their parameters inlined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_stalls_past_its_lease_and_a_retry_takes_over_through_pgbouncer() {
    let store = idem_tests::pgbouncer_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    stalled_and_taken_over(Arc::new(store), Arc::new(ledger)).await;
}

/// Behind Sentinel with `with_replication`: the commit and its `WAIT` in one
/// round trip, and the stalled holder's commit refused all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_stalls_past_its_lease_and_a_retry_takes_over_behind_sentinel_with_replication() {
    let store = idem_tests::sentinel::sentinel_store().await;
    let prefix = unique_prefix("stall-sentinel");
    // The shared Sentinels never fail over: their primary is 7401.
    let ledger: Arc<dyn Ledger> = Arc::new(
        RedisLedger::connect(
            "redis://127.0.0.1:7401",
            &store,
            &format!("{prefix}balance:"),
        )
        .await
        .expect("redis ledger"),
    );
    stalled_and_taken_over(Arc::new(store), ledger).await;
}

/// The debit charges a payment provider before it debits the ledger. The
/// holder charges, then stalls past its lease; the takeover on the other
/// instance charges again with the same downstream key, and the provider
/// answers with the first charge: one charge, one debit.
async fn the_provider_charges_once(
    store: Arc<dyn Store>,
    stalling: Arc<dyn Store>,
    ledger: Arc<dyn Ledger>,
) {
    let (provider, charges) = provider().await;
    let stalling = charging(stalling, Arc::clone(&ledger), Some(&provider)).await;
    let other = charging(Arc::clone(&store), ledger, Some(&provider)).await;
    holder_stalls_past_its_lease(&*store, stalling, other).await;
    assert_eq!(charges.count(), 1, "the provider charged once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_debit_taken_over_charges_the_provider_once_on_memory() {
    let records = MemoryStore::new();
    let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(&records));
    let stalling = Arc::new(RenewalsFail::renewals_fail(Arc::new(records.clone())));
    the_provider_charges_once(Arc::new(records), stalling, ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_debit_taken_over_charges_the_provider_once_on_redis() {
    let (store, ledger) = redis_records(&unique_prefix("provider")).await;
    let stalling = Arc::new(RenewalsFail::renewals_fail(Arc::new(store.clone())));
    the_provider_charges_once(Arc::new(store), stalling, ledger).await;
}
