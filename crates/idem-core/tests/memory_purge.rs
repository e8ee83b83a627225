//! The memory store's purge: expired payments and the claims of holders that
//! crashed are forgotten and their bytes given back, live records are kept,
//! and a purge of many records lets the worker's other tasks run.

use std::sync::Arc;
use std::time::Duration;

use idem_core::memory::ManualClock;
use idem_core::store::Begin;
use idem_core::{Fingerprint, IdempotencyKey, Lease, MemoryStore, Outcome, RecordId, Scope, Store};

const START_US: u64 = 1_700_000_000_000_000;
const SECOND: Duration = Duration::from_secs(1);

fn id(n: usize) -> RecordId {
    RecordId::new(
        &Scope::new("shop"),
        &IdempotencyKey::parse(&format!("order-{n}")).expect("key"),
    )
}

fn fingerprint() -> Fingerprint {
    Fingerprint::from_bytes([1; 32])
}

async fn claim(store: &MemoryStore, n: usize, lease: Duration) -> Lease {
    match store.begin(&id(n), &fingerprint(), lease).await {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!("order {n}: expected a claim, got {other:?}"),
    }
}

async fn pay(store: &MemoryStore, n: usize, ttl: Duration) {
    let lease = claim(store, n, 10 * SECOND).await;
    store
        .complete(&id(n), &lease, &Outcome::new(format!("paid {n}")), ttl)
        .await
        .expect("complete");
}

/// A store without traces: what expires can be purged at once (traces are
/// purged once they end, below).
fn store_on(clock: &Arc<ManualClock>, shards: usize) -> MemoryStore {
    MemoryStore::builder()
        .clock(Arc::clone(clock))
        .shards(shards)
        .purge_interval(None)
        .expired_trace(Duration::ZERO)
        .build()
}

#[tokio::test]
async fn expired_payments_are_kept_as_traces_until_the_traces_end_then_purged() {
    let clock = Arc::new(ManualClock::new(START_US));
    let store = MemoryStore::builder()
        .clock(Arc::clone(&clock))
        .purge_interval(None)
        .expired_trace(60 * SECOND)
        .build();
    for n in 0..10 {
        pay(&store, n, SECOND).await;
    }
    clock.advance(2 * SECOND);
    assert_eq!(store.purge_expired(), 0, "traced");
    assert!(matches!(
        store.begin(&id(3), &fingerprint(), SECOND).await,
        Ok(Begin::Expired)
    ));
    clock.advance(60 * SECOND);
    assert_eq!(store.purge_expired(), 10, "the traces have ended");
    assert_eq!((store.len(), store.bytes()), (0, 0));
}

#[tokio::test]
async fn a_purge_forgets_expired_payments_and_crashed_claims_and_keeps_the_rest() {
    let clock = Arc::new(ManualClock::new(START_US));
    let store = store_on(&clock, 4);
    // Payments kept for 1 s and for 1 h; a holder that crashed with a 2 s
    // lease; a holder still working under a 1 h lease.
    for n in 0..10 {
        pay(&store, n, SECOND).await;
    }
    for n in 10..20 {
        pay(&store, n, 3600 * SECOND).await;
    }
    claim(&store, 20, 2 * SECOND).await;
    claim(&store, 21, 3600 * SECOND).await;
    let held = store.bytes();

    assert_eq!(store.purge_expired(), 0, "nothing has expired yet");
    assert_eq!(store.len(), 22);

    clock.advance(SECOND + Duration::from_millis(1));
    assert_eq!(store.purge_expired(), 10, "the payments kept for 1 s");
    clock.advance(SECOND);
    assert_eq!(store.purge_expired(), 1, "the crashed holder's claim");
    assert_eq!(store.purge_expired(), 0, "nothing twice");
    assert_eq!(store.len(), 11);
    assert!(store.bytes() < held, "the bytes are given back");

    // What is left answers as before: replays, and a claim in flight.
    for n in 10..20 {
        match store.begin(&id(n), &fingerprint(), SECOND).await {
            Ok(Begin::Replay(outcome)) => {
                assert_eq!(outcome.as_bytes(), format!("paid {n}").as_bytes());
            }
            other => panic!("order {n}: expected its replay, got {other:?}"),
        }
    }
    assert!(matches!(
        store.begin(&id(21), &fingerprint(), SECOND).await,
        Ok(Begin::InFlight { .. })
    ));
    // And a forgotten one runs again.
    assert!(matches!(
        store.begin(&id(3), &fingerprint(), SECOND).await,
        Ok(Begin::Acquired(_))
    ));

    clock.advance(3600 * SECOND);
    assert_eq!(store.purge_expired(), 12, "everything, the new claim too");
    assert_eq!((store.len(), store.bytes()), (0, 0));
}

#[tokio::test]
async fn a_payment_retried_after_its_record_expired_and_kept_again_is_not_purged_early() {
    // Order 0 expires, is paid again (a new record under the same key, with
    // a new lifetime): the purge must judge the record, not the old entry
    // that named it.
    let clock = Arc::new(ManualClock::new(START_US));
    let store = store_on(&clock, 1);
    pay(&store, 0, SECOND).await;
    clock.advance(2 * SECOND);
    pay(&store, 0, 3600 * SECOND).await;
    // A claim released and claimed again, then kept.
    let lease = claim(&store, 1, SECOND).await;
    store.release(&id(1), &lease).await.expect("release");
    pay(&store, 1, 3600 * SECOND).await;

    clock.advance(10 * SECOND);
    assert_eq!(store.purge_expired(), 0);
    assert_eq!(store.len(), 2);
    assert!(matches!(
        store.begin(&id(0), &fingerprint(), SECOND).await,
        Ok(Begin::Replay(_))
    ));
}

#[tokio::test]
async fn thousands_expiring_at_once_are_all_purged() {
    // More than one hold of the lock's worth, in one shard: payments, and
    // the claims of holders that all crashed.
    let clock = Arc::new(ManualClock::new(START_US));
    let store = store_on(&clock, 1);
    for n in 0..5_000 {
        pay(&store, n, SECOND).await;
    }
    for n in 5_000..7_500 {
        claim(&store, n, SECOND).await;
    }
    clock.advance(2 * SECOND);
    assert_eq!(store.purge_expired(), 7_500);
    assert_eq!((store.len(), store.bytes()), (0, 0));

    // Crashed claims alone.
    for n in 0..2_500 {
        claim(&store, n, SECOND).await;
    }
    clock.advance(2 * SECOND);
    assert_eq!(store.purge_expired(), 2_500);
    assert!(store.is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn other_requests_run_while_the_periodic_purge_forgets_thousands() {
    // One worker: a purge that held it for the whole pass would let no other
    // task see the store between 5 000 records and none.
    let clock = Arc::new(ManualClock::new(START_US));
    let store = MemoryStore::builder()
        .clock(Arc::clone(&clock))
        .shards(1)
        .purge_interval(Some(Duration::from_millis(5)))
        .expired_trace(Duration::ZERO)
        .build();
    for n in 0..5_000 {
        pay(&store, n, SECOND).await;
    }
    clock.advance(2 * SECOND);
    let mut seen = vec![store.len()];
    let watch = async {
        while !store.is_empty() {
            if seen.last() != Some(&store.len()) {
                seen.push(store.len());
            }
            tokio::task::yield_now().await;
        }
        seen.push(0);
    };
    tokio::time::timeout(Duration::from_secs(10), watch)
        .await
        .expect("the periodic purge forgets them");
    assert!(
        seen.len() > 3,
        "no task ran between the purge's first and last record: {seen:?}"
    );
}
