//! How many heap allocations one call through the engine makes on the
//! memory store: a new key and a replay. Counted, not timed, so the figure
//! is the same on every machine; a change that adds one to the claim path
//! fails here and has to say why.

#![allow(missing_docs)]

use std::time::Duration;

use idem_core::{Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Never, Policy, Scope};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// The allocations `f` makes (the runtime is single-threaded, so all are its).
async fn allocations<T>(f: impl std::future::Future<Output = T>) -> (T, u64) {
    let before = dhat::HeapStats::get().total_blocks;
    let out = f.await;
    (out, dhat::HeapStats::get().total_blocks - before)
}

fn call(key: &str) -> Call {
    Call::new(
        Scope::new("account-42"),
        IdempotencyKey::parse(key).expect("valid key"),
        Fingerprint::of("debit", &(42u64, 1000u64)).expect("fingerprint"),
    )
}

#[allow(clippy::unused_async)] // stands in for an async handler
async fn debit(n: u64) -> Result<u64, Never> {
    Ok(n)
}

/// What the engine itself may allocate for a new key on the memory store:
/// the claim's state shared with the operation (and its renewal), the
/// encoded outcome, and the shared header of its bytes, which the store
/// keeps. Nothing for the store's calls: the memory store answers at once.
const NEW_KEY: u64 = 3;

/// With the `metrics` feature, each metric with labels builds its key's
/// list of labels, even with no recorder installed: the decision and the
/// store call's duration, for the begin and for the completion.
#[cfg(feature = "metrics")]
const METRICS: (u64, u64) = (3, 2);
#[cfg(not(feature = "metrics"))]
const METRICS: (u64, u64) = (0, 0);

#[tokio::test(flavor = "current_thread")]
async fn a_payment_allocates_only_its_claim_and_outcome_and_its_retry_nothing() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let store = MemoryStore::builder()
        .max_bytes(usize::MAX)
        .purge_interval(None)
        .build();
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(1)));
    // The fewest over many payments: the store's table and queues grow now
    // and then, which is not the engine's doing.
    let mut new_key = u64::MAX;
    let mut replay = u64::MAX;
    for n in 0..500 {
        let first = call(&format!("payment-{n}"));
        let (ran, allocated) = allocations(engine.run(&first, |_| debit(n))).await;
        assert!(!ran.expect("runs").is_replayed());
        new_key = new_key.min(allocated);
        let retry = call(&format!("payment-{n}"));
        let (ran, allocated) = allocations(engine.run(&retry, |_| debit(n))).await;
        assert!(ran.expect("replays").is_replayed());
        replay = replay.min(allocated);
    }
    assert_eq!(
        new_key,
        NEW_KEY + METRICS.0,
        "a new key allocates its claim's state, its outcome and the outcome's shared header; \
         anything more is new on the claim path and should say why"
    );
    assert_eq!(
        replay, METRICS.1,
        "a retry answered from memory allocates nothing: the store answers at once and the \
         outcome's bytes are shared"
    );
}
