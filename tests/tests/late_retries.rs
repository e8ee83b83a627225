//! Late retries: a retry that comes after its record's lifetime is refused
//! (HTTP 412 `key-expired`, `Error::Expired`) for as long as the record's
//! trace lasts, instead of running the operation again; on the memory
//! store (its clock moved a day), Redis, Valkey, PostgreSQL and MariaDB
//! (short lifetimes, real clocks).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use idem_core::memory::ManualClock;
use idem_core::{Engine, Error, MemoryStore, Never, Policy, Ran, Store};
use idem_tests::{
    mysql_store, payments_on_memory, pg_store, redis_url, unique_prefix, valkey_url, Payments,
};

const DAY: Duration = Duration::from_hours(24);

fn clocked(clock: &Arc<ManualClock>, trace: Duration) -> MemoryStore {
    MemoryStore::builder()
        .clock(Arc::clone(clock))
        .expired_trace(trace)
        .build()
}

#[tokio::test]
async fn a_debit_retried_a_day_later_is_refused_not_charged_again() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let url = payments_on_memory(clocked(&clock, DAY)).await;
    let c = Payments::new(&url);
    assert_eq!(c.debit("alice", "pay-late", 1000).await.status(), 201);
    assert_eq!(c.balance("alice").await, 9000);

    // The client's retry queue sends it again a day and a minute later.
    clock.advance(DAY + Duration::from_mins(1));
    let late = c.debit("alice", "pay-late", 1000).await;
    assert_eq!(late.status(), StatusCode::PRECONDITION_FAILED);
    assert_eq!(
        late.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json")
    );
    let problem: serde_json::Value = late.json().await.expect("problem json");
    assert_eq!(problem["type"], "urn:idem:problem:key-expired");
    assert_eq!(problem["status"], 412);
    let detail = problem["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("expired") && detail.contains("not processed again"),
        "{detail}"
    );
    assert_eq!(c.balance("alice").await, 9000, "not charged again");

    // The same key with another body is still a reused key.
    assert_eq!(c.debit("alice", "pay-late", 2500).await.status(), 422);

    // Once the trace has ended too, the key is a new request.
    clock.advance(DAY);
    assert_eq!(c.debit("alice", "pay-late", 1000).await.status(), 201);
    assert_eq!(c.balance("alice").await, 8000);
}

#[tokio::test]
async fn with_the_trace_turned_off_a_late_retry_runs_again() {
    // What `expired_trace(Duration::ZERO)` chooses (and what idem did
    // before traces): a retry after the lifetime is a new request.
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let url = payments_on_memory(clocked(&clock, Duration::ZERO)).await;
    let c = Payments::new(&url);
    assert_eq!(c.debit("alice", "pay-off", 1000).await.status(), 201);
    clock.advance(DAY + Duration::from_mins(1));
    assert_eq!(c.debit("alice", "pay-off", 1000).await.status(), 201);
    assert_eq!(c.balance("alice").await, 8000);
}

/// Runs one debit under `key` on `store` with records kept `ttl`: refused
/// once expired, until the trace ends, then run again.
async fn late_retries_are_refused_until_the_trace_ends(store: impl Store, what: &str) {
    let ttl = Duration::from_millis(300);
    let engine = Engine::new(store).with_policy(Policy::default().ttl(ttl));
    let debits = Arc::new(AtomicUsize::new(0));
    let call = idem_tests::call("accounts", "late-1");
    let run = || {
        let debits = Arc::clone(&debits);
        let engine = engine.clone();
        let call = call.clone();
        async move {
            engine
                .run(&call, |_| async move {
                    let n = debits.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok::<_, Never>(format!("debit {n}"))
                })
                .await
        }
    };
    assert!(matches!(run().await, Ok(Ran::Executed(_))), "{what}");
    // Replayed while it lives; then refused; then, the trace over, run.
    let mut answer = run().await;
    while matches!(answer, Ok(Ran::Replayed(_))) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        answer = run().await;
    }
    assert!(matches!(answer, Err(Error::Expired)), "{what}: {answer:?}");
    assert_eq!(debits.load(Ordering::SeqCst), 1, "{what}: not run again");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while matches!(answer, Err(Error::Expired)) {
        assert!(std::time::Instant::now() < deadline, "{what}: never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
        answer = run().await;
    }
    assert!(matches!(answer, Ok(Ran::Executed(_))), "{what}: {answer:?}");
    assert_eq!(debits.load(Ordering::SeqCst), 2, "{what}");
}

const TRACE: Duration = Duration::from_millis(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_retries_are_refused_on_redis_until_the_trace_ends() {
    for (url, what) in [(redis_url(), "redis"), (valkey_url(), "valkey")] {
        let store = idem_redis::RedisStore::connect(&url)
            .await
            .expect(what)
            .with_prefix(&unique_prefix("late"))
            .with_expired_trace(TRACE);
        late_retries_are_refused_until_the_trace_ends(store, what).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_retries_are_refused_on_postgres_until_the_trace_ends() {
    let store = pg_store().await.with_expired_trace(TRACE);
    late_retries_are_refused_until_the_trace_ends(store, "postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_retries_are_refused_on_mariadb_until_the_trace_ends() {
    let store = mysql_store().await.with_expired_trace(TRACE);
    late_retries_are_refused_until_the_trace_ends(store, "mariadb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_retries_are_refused_on_memory_until_the_trace_ends() {
    let store = MemoryStore::builder().expired_trace(TRACE).build();
    late_retries_are_refused_until_the_trace_ends(store, "memory").await;
}
