//! Duplicates that wait (`OnInFlight::Wait`) are woken when the first request
//! finishes, instead of polling. On `MemoryStore` and tokio's paused clock,
//! each of 100 waiters answers at the very instant the first completes (or
//! releases), having asked the store twice: before and after. On PostgreSQL
//! (`LISTEN`/`NOTIFY`), the store reads a completed record once for all its
//! waiters: 100 waiters begin once each, where polling asks six times each.
//! On Redis (the change published from the same script), twice each.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Call, Engine, Failure, Fingerprint, IdempotencyKey, MemoryStore, OnInFlight, Policy, Ran,
    RecordId, Store,
};
use idem_tests::SlowBegin;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Busy;

impl Failure for Busy {
    fn is_final(&self) -> bool {
        false
    }
}

fn call() -> Call {
    Call::new(
        "orders",
        IdempotencyKey::parse("o-1").expect("key"),
        Fingerprint::of("ship", &1).expect("fingerprint"),
    )
    .on_in_flight(OnInFlight::Wait {
        max: Duration::from_secs(5),
    })
}

/// The first caller works for `work`, then answers `first`; 100 duplicates
/// start meanwhile and wait. Returns each duplicate's answer and when it
/// came, and the begins counted.
async fn hundred_waiters(
    first: Result<u32, Busy>,
    work: Duration,
) -> (Vec<(Result<Ran<u32>, String>, Duration)>, usize) {
    hundred_waiters_on(MemoryStore::new(), first, work).await
}

async fn hundred_waiters_on<S: Store>(
    inner: S,
    first: Result<u32, Busy>,
    work: Duration,
) -> (Vec<(Result<Ran<u32>, String>, Duration)>, usize) {
    let store = Arc::new(SlowBegin::slow_begins(inner, Duration::ZERO));
    let engine = Engine::from_arc(Arc::clone(&store) as Arc<dyn Store>)
        .with_policy(Policy::default().lease(Duration::from_secs(10)));
    let start = tokio::time::Instant::now();
    let (claimed, holds_claim) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn({
        let engine = engine.clone();
        async move {
            engine
                .run(&call(), move |_| async move {
                    let _ = claimed.send(());
                    tokio::time::sleep(work).await;
                    first
                })
                .await
        }
    });
    // The duplicates arrive once the first request holds the claim: on a
    // real store its begin takes a while, and a duplicate that came first
    // would be the first request itself.
    holds_claim.await.expect("the first request runs");
    let waiters: Vec<_> = (0..100)
        .map(|n| {
            let engine = engine.clone();
            tokio::spawn(async move {
                let answer = engine
                    .run(&call(), move |_| async move { Ok::<_, Busy>(1000 + n) })
                    .await
                    .map_err(|e| format!("{e:?}"));
                (answer, start.elapsed())
            })
        })
        .collect();
    let _ = holder.await;
    let mut answers = Vec::new();
    for w in waiters {
        answers.push(w.await.expect("waiter"));
    }
    (answers, store.begins())
}

#[tokio::test(start_paused = true)]
async fn duplicates_waiting_on_a_charge_get_its_receipt_the_moment_it_is_recorded() {
    let work = Duration::from_millis(300);
    let (answers, begins) = hundred_waiters(Ok(7), work).await;
    for (answer, at) in &answers {
        assert_eq!(answer, &Ok(Ran::Replayed(7)));
        assert_eq!(
            *at, work,
            "woken when the charge was recorded, not at a later poll"
        );
    }
    assert_eq!(
        begins,
        1 + 2 * 100,
        "each waiter asks before and after, no polls"
    );
}

#[tokio::test(start_paused = true)]
async fn duplicates_waiting_on_a_failed_attempt_run_it_again_at_once() {
    let work = Duration::from_millis(300);
    let (answers, begins) = hundred_waiters(Err(Busy), work).await;
    let ran: Vec<_> = answers
        .iter()
        .filter(|(a, _)| matches!(a, Ok(Ran::Executed(_))))
        .collect();
    assert_eq!(
        ran.len(),
        1,
        "one waiter runs it again once it was released"
    );
    assert!(
        ran.iter().all(|(_, at)| *at == work),
        "released, a waiter runs at once: {ran:?}"
    );
    let replayed = answers
        .iter()
        .filter(|(a, _)| matches!(a, Ok(Ran::Replayed(_))))
        .count();
    assert_eq!(replayed, 99, "the others replay its result");
    // Each waiter asks before and once woken by the release (the first to
    // ask runs it, and records before the next asks).
    assert_eq!(begins, 1 + 2 * 100, "no polls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_waiting_duplicates_are_woken_by_the_completion_not_by_polls() {
    let store = idem_tests::pg_store().await;
    // Bring the wake channel up first, as a long-running service has it.
    let warm = RecordId::from_bytes([7; 32]);
    for _ in 0..5 {
        store.changed(&warm, Duration::from_millis(50)).await;
    }
    let (answers, begins) = hundred_waiters_on(store, Ok(7), Duration::from_millis(400)).await;
    for (answer, _) in &answers {
        assert_eq!(answer, &Ok(Ran::Replayed(7)));
    }
    assert_eq!(
        begins,
        1 + 100,
        "woken waiters get the completion the store read for them (polling asks 6 times each)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_waiting_duplicates_are_woken_by_listen_on_a_direct_connection() {
    let store = idem_tests::pgbouncer_store().await;
    let warm = RecordId::from_bytes([7; 32]);
    for _ in 0..5 {
        store.changed(&warm, Duration::from_millis(50)).await;
    }
    let (answers, begins) = hundred_waiters_on(store, Ok(7), Duration::from_millis(400)).await;
    all_replayed_after(&answers, begins, 1 + 100);
}

/// Behind a transaction pooler with no direct connection for `LISTEN`, the
/// duplicates a service holds while it records a charge are answered the
/// moment its own completion lands, not at their next poll (which comes
/// up to 250 ms later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_without_listen_waiting_duplicates_are_woken_by_their_own_process() {
    let pool = idem_tests::pool_through(&idem_tests::pgbouncer_url(), 8).await;
    let store = idem_postgres::PgStore::new(pool)
        .with_schema(&idem_tests::unique_schema())
        .expect("valid schema name")
        .behind_transaction_pooler();
    store.migrate().await.expect("migration through PgBouncer");
    assert!(
        !store.wakes(),
        "no channel: other processes' changes are polled"
    );
    // Recorded just after a poll (they come 5, 15, 35 ... 315, 565, 815 ms
    // into a wait): a waiter that only polled would answer some 245 ms late.
    let work = Duration::from_millis(570);
    let (answers, _) = hundred_waiters_on(store, Ok(7), work).await;
    for (answer, _) in &answers {
        assert_eq!(answer, &Ok(Ran::Replayed(7)));
    }
    // A waiter between two looks when the completion lands (its claim
    // answered "in flight" just before) is not registered to be woken, and
    // finds the replay at its next look; on a loaded machine a few are.
    let at_once = answers
        .iter()
        .filter(|(_, at)| *at < work + Duration::from_millis(150))
        .count();
    assert!(
        at_once >= 90,
        "{at_once} of 100 waiters answered at once; the latest {:?} after the charge was recorded",
        answers.iter().map(|(_, at)| at.saturating_sub(work)).max()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_sentinel_after_a_failover_waiting_duplicates_are_woken_by_the_new_primary() {
    let mut topology = idem_tests::sentinel::PrivateSentinels::start();
    let store = idem_redis::RedisStore::connect_sentinel(
        topology.sentinel_urls(),
        idem_tests::sentinel::SERVICE,
    )
    .await
    .expect("the Sentinels name a primary")
    .with_prefix("wake:")
    .with_timeout(Duration::from_millis(500));
    let warm = RecordId::from_bytes([7; 32]);
    store.changed(&warm, Duration::from_millis(50)).await;
    let old = topology.kill_primary();
    topology.wait_for_promotion(old);
    // The store and its wake channel find the new primary (the channel
    // retries its subscription every second).
    for _ in 0..40 {
        let _ = store.inspect(&warm).await;
        store.changed(&warm, Duration::from_millis(100)).await;
    }
    let (answers, begins) = hundred_waiters_on(store, Ok(7), Duration::from_millis(400)).await;
    all_replayed_after(&answers, begins, 1 + 2 * 100);
}

/// Every waiter got the replay, and the store was asked `begins` times in
/// all (polling asks 6 times each).
fn all_replayed_after(
    answers: &[(Result<Ran<u32>, String>, Duration)],
    begins: usize,
    expected: usize,
) {
    for (answer, _) in answers {
        assert_eq!(answer, &Ok(Ran::Replayed(7)));
    }
    assert_eq!(begins, expected, "woken, not polling");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_waiting_duplicates_are_woken_by_the_completion_not_by_polls() {
    let store = idem_redis::RedisStore::connect(&idem_tests::redis_url())
        .await
        .expect("redis")
        .with_prefix(&idem_tests::unique_prefix("wake"));
    let warm = RecordId::from_bytes([7; 32]);
    for _ in 0..5 {
        store.changed(&warm, Duration::from_millis(50)).await;
    }
    let (answers, begins) = hundred_waiters_on(store, Ok(7), Duration::from_millis(400)).await;
    for (answer, _) in &answers {
        assert_eq!(answer, &Ok(Ran::Replayed(7)));
    }
    assert_eq!(
        begins,
        1 + 2 * 100,
        "woken waiters ask before and after (polling asks 6 times each)"
    );
}
