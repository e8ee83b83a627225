//! Engine behaviour on the in-memory store: exactly-once under contention,
//! callers that give up, panics, lease renewal, failure recording, waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{
    Call, Engine, Error, Failure, Fingerprint, IdempotencyKey, MemoryStore, OnInFlight, Policy,
    Ran, Scope, Store,
};
use idem_tests::{Hooked, Hooks, Transition};
use serde::{Deserialize, Serialize};

fn call(key: &str, input: &serde_json::Value) -> Call {
    Call::new(
        Scope::new("tests"),
        IdempotencyKey::parse(key).expect("valid key"),
        Fingerprint::of("op", input).expect("fingerprint"),
    )
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum PayError {
    Declined(String),
    Timeout,
}

impl Failure for PayError {
    fn is_final(&self) -> bool {
        matches!(self, PayError::Declined(_))
    }
}

impl std::fmt::Display for PayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_tasks_on_one_key_execute_once() {
    let engine = Engine::new(MemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("one-key", &serde_json::json!({"amount": 10}));
    let start = Arc::new(tokio::sync::Barrier::new(1000));
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let (engine, runs, c, start) = (
            engine.clone(),
            Arc::clone(&runs),
            c.clone(),
            Arc::clone(&start),
        );
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            engine
                .run(&c, |_claim| async move {
                    let n = runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, PayError>(format!("receipt-{n}"))
                })
                .await
        }));
    }
    let (mut executed, mut replayed, mut in_flight) = (0, 0, 0);
    for t in tasks {
        match t.await.expect("task") {
            Ok(Ran::Executed(r)) => {
                executed += 1;
                assert_eq!(r, "receipt-0");
            }
            Ok(Ran::Replayed(r)) => {
                replayed += 1;
                assert_eq!(r, "receipt-0", "a replay returns the first result");
            }
            Err(Error::InFlight { retry_after }) => {
                in_flight += 1;
                assert!(retry_after > Duration::ZERO);
            }
            Err(e) => panic!("unexpected answer: {e}"),
        }
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the operation ran exactly once"
    );
    assert_eq!(executed, 1);
    assert_eq!(executed + replayed + in_flight, 1000);
    // After completion, every further call replays.
    let again = engine
        .run(&c, |_| async { Ok::<_, PayError>("never".to_string()) })
        .await
        .expect("replay");
    assert_eq!(again, Ran::Replayed("receipt-0".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_duplicates_get_the_first_result() {
    let engine = Engine::new(MemoryStore::new()).with_policy(Policy::default().on_in_flight(
        OnInFlight::Wait {
            max: Duration::from_secs(10),
        },
    ));
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("wait", &serde_json::json!(1));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (engine, runs, c) = (engine.clone(), Arc::clone(&runs), c.clone());
        tasks.push(tokio::spawn(async move {
            engine
                .run(&c, |_| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok::<_, PayError>(7u32)
                })
                .await
        }));
    }
    let mut replayed = 0;
    for t in tasks {
        let ran = t
            .await
            .expect("task")
            .expect("every waiter gets the result");
        assert_eq!(*ran.get(), 7);
        replayed += usize::from(ran.is_replayed());
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(replayed, 63);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_gives_up_after_max() {
    let store = MemoryStore::new();
    let engine = Engine::new(store.clone());
    let c = call("wait-max", &serde_json::json!(1));
    let slow = {
        let (engine, c) = (engine.clone(), c.clone());
        tokio::spawn(async move {
            engine
                .run(&c, |_| async {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    Ok::<_, PayError>(1u8)
                })
                .await
        })
    };
    // Until the slow operation holds its claim.
    idem_tests::until_claimed(&store, "the slow operation").await;
    let waited = engine
        .run(
            &c.clone().on_in_flight(OnInFlight::Wait {
                max: Duration::from_millis(300),
            }),
            |_| async { Ok::<_, PayError>(2u8) },
        )
        .await;
    assert!(
        matches!(waited, Err(Error::InFlight { .. })),
        "got {waited:?}"
    );
    slow.abort();
}

/// Runs `c` once more and expects the claim still in flight.
async fn still_in_flight(engine: &Engine, c: &Call, runs: &Arc<AtomicUsize>) {
    let retry = engine.run(c, |_| charge(runs)).await;
    assert!(
        matches!(retry, Err(Error::InFlight { .. })),
        "a retry while the outcome is unknown must be told it is in flight, got {retry:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_that_times_out_after_the_charge_keeps_the_key_until_the_lease_ends() {
    let lease = Duration::from_millis(600);
    let engine = Engine::new(MemoryStore::new()).with_policy(Policy::default().lease(lease));
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("times-out-after-charge", &serde_json::json!({"amount": 5}));

    // The charge happens, then the answer from the provider is slow and the
    // worker's own timeout drops the operation: its outcome is unknown.
    let charged = Arc::clone(&runs);
    let gone = tokio::time::timeout(
        Duration::from_millis(50),
        engine.run(&c, |claim| async move {
            let _ = charge(&charged).await;
            std::future::pending::<()>().await;
            Ok::<_, PayError>(claim.fencing_token().0)
        }),
    )
    .await;
    assert!(gone.is_err(), "the worker gave up");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The retry must not charge again while the claim's lease lives.
    still_in_flight(&engine, &c, &runs).await;
    tokio::time::sleep(lease / 2).await;
    still_in_flight(&engine, &c, &runs).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "charged once while the lease lived"
    );

    // After the lease (nothing renews a dropped operation's claim), a retry
    // runs again under a newer fencing token.
    let deadline = std::time::Instant::now() + lease * 20;
    let again = loop {
        match engine.run(&c, |_| charge(&runs)).await {
            Err(Error::InFlight { .. }) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "in flight long after the lease"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => break other,
        }
    };
    assert_eq!(
        again.expect("runs after the lease"),
        Ran::Executed("charge-1".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_that_panics_after_the_charge_keeps_the_key_until_the_lease_ends() {
    // Long enough that the retry below comes within it on a loaded machine
    // (at 600 ms a full parallel run once let it expire first; a panic's
    // backtrace is printed before the task ends).
    let lease = Duration::from_secs(5);
    let engine = Engine::new(MemoryStore::new()).with_policy(Policy::default().lease(lease));
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("panics-after-charge", &serde_json::json!("x"));
    let task = {
        let (engine, c, runs) = (engine.clone(), c.clone(), Arc::clone(&runs));
        tokio::spawn(async move {
            engine
                .run(&c, |claim| async move {
                    let _ = charge(&runs).await;
                    assert!(claim.ttl().is_zero(), "operation blew up after charging");
                    Ok::<_, PayError>(String::new())
                })
                .await
        })
    };
    assert!(task.await.expect_err("the panic propagates").is_panic());
    still_in_flight(&engine, &c, &runs).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "charged once while the lease lived"
    );
    // Retries are told it is in flight until the lease ends; then one runs it.
    let deadline = tokio::time::Instant::now() + lease * 4;
    let again = loop {
        match engine.run(&c, |_| charge(&runs)).await {
            Err(Error::InFlight { retry_after, .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(retry_after.min(Duration::from_millis(200))).await;
            }
            other => break other,
        }
    };
    assert_eq!(
        again.expect("runs after the lease"),
        Ran::Executed("charge-1".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_that_gives_up_while_the_claim_is_taken_leaves_the_key_free_at_once() {
    // The store takes the claim but its answer is slow; the worker gives up
    // before it arrives. Nothing ran, so the key must not stay claimed for
    // the 60 s lease.
    let memory = MemoryStore::new();
    let store = Arc::new(
        Faults {
            begin_answer_delay: Duration::from_millis(200),
            ..Faults::new()
        }
        .on(memory.clone()),
    );
    let engine = Engine::from_arc(Arc::clone(&store) as Arc<dyn Store>)
        .with_policy(Policy::default().lease(Duration::from_mins(1)));
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("gives-up-during-begin", &serde_json::json!("x"));
    let gone =
        tokio::time::timeout(Duration::from_millis(20), engine.run(&c, |_| charge(&runs))).await;
    assert!(
        gone.is_err(),
        "the worker gave up before the claim was answered"
    );
    let freed = wait_until_acquirable(&memory, &c, Duration::from_secs(3)).await;
    assert!(
        freed,
        "the claim taken after the worker left must be released at once"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_that_gives_up_while_a_timed_out_charge_is_released_leaves_the_key_free() {
    // The carrier timed out (nothing was charged); the worker's own timeout
    // fires while the engine is still releasing the claim on a slow store.
    let memory = MemoryStore::new();
    let store = Arc::new(
        Faults {
            release_delay: Duration::from_millis(200),
            ..Faults::new()
        }
        .on(memory.clone()),
    );
    let engine = Engine::from_arc(Arc::clone(&store) as Arc<dyn Store>)
        .with_policy(Policy::default().lease(Duration::from_mins(1)));
    let c = call("gives-up-during-release", &serde_json::json!("x"));
    let gone = tokio::time::timeout(
        Duration::from_millis(50),
        engine.run(&c, |_| async { Err::<String, _>(PayError::Timeout) }),
    )
    .await;
    assert!(
        gone.is_err(),
        "the worker gave up while the claim was being released"
    );
    let freed = wait_until_acquirable(&memory, &c, Duration::from_secs(3)).await;
    assert!(
        freed,
        "the release must finish without its caller, not wait for the 60 s lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_the_store_refuses_for_a_while_is_retried_until_the_key_is_free() {
    // The provider timed out (a transient failure: nothing was charged), and
    // the store is briefly unreachable when the engine releases the claim.
    let memory = MemoryStore::new();
    let store = Arc::new(
        Faults {
            failing_releases: AtomicUsize::new(3),
            ..Faults::new()
        }
        .on(memory.clone()),
    );
    let engine = Engine::from_arc(Arc::clone(&store) as Arc<dyn Store>)
        .with_policy(Policy::default().lease(Duration::from_mins(1)));
    let c = call("release-blip", &serde_json::json!("x"));
    let timed_out = engine
        .run(&c, |_| async { Err::<String, _>(PayError::Timeout) })
        .await;
    assert!(matches!(
        timed_out,
        Err(Error::Failed(Ran::Executed(PayError::Timeout)))
    ));
    let freed = wait_until_acquirable(&memory, &c, Duration::from_secs(5)).await;
    assert!(
        freed,
        "the release must be retried in the background, not left to the 60 s lease"
    );
    assert!(store.hooks().releases.load(Ordering::SeqCst) >= 4);
}

/// An operation that works for most of its lease before it first yields
/// (a CPU-heavy step, a blocking call) must still have its lease renewed
/// in time: the first renewal is due a third of the lease after the
/// operation started, not a third after its first poll ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_busy_before_it_first_yields_keeps_its_claim() {
    let store = MemoryStore::new();
    let lease = Duration::from_millis(600);
    let engine = Engine::new(store.clone()).with_policy(Policy::default().lease(lease));
    let c = call("busy-first", &serde_json::json!("x"));
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let busy = {
        let (engine, c) = (engine.clone(), c.clone());
        tokio::spawn(async move {
            engine
                .run(&c, |claim| async move {
                    let _ = started_tx.send(());
                    // 450 of the lease's 600 ms without yielding.
                    std::thread::sleep(Duration::from_millis(450));
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    Ok::<_, PayError>(claim.fencing_token().0)
                })
                .await
        })
    };
    started_rx.await.expect("the operation started");
    // Past the first lease's end (600 ms) while the operation still runs:
    // the claim must have been renewed, so a duplicate is told it is in
    // flight rather than taking over.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let dup = engine.run(&c, |_| async { Ok::<_, PayError>(0u64) }).await;
    assert!(
        matches!(dup, Err(Error::InFlight { .. })),
        "a duplicate took over the busy operation's claim: {dup:?}"
    );
    let first = busy.await.expect("task").expect("the operation completes");
    assert!(matches!(first, Ran::Executed(t) if t > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_renewal_keeps_a_slow_operation_exclusive() {
    let store = MemoryStore::new();
    let lease = Duration::from_millis(300);
    let engine = Engine::new(store.clone()).with_policy(Policy::default().lease(lease));
    let c = call("slow", &serde_json::json!("x"));
    let runs = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let slow = {
        let (engine, c, runs) = (engine.clone(), c.clone(), Arc::clone(&runs));
        tokio::spawn(async move {
            engine
                .run(&c, |claim| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let _ = started_tx.send(());
                    tokio::time::sleep(lease * 3).await;
                    assert!(!claim.is_lost(), "the claim was renewed, not lost");
                    Ok::<_, PayError>(claim.fencing_token().0)
                })
                .await
        })
    };
    // Duplicates throughout three lease lengths: none may take over.
    started_rx.await.expect("the slow operation started");
    let mut attempts = 0;
    while !slow.is_finished() {
        let dup = engine.run(&c, |_| async { Ok::<_, PayError>(0u64) }).await;
        match dup {
            Err(Error::InFlight { .. }) | Ok(Ran::Replayed(_)) => {}
            other => panic!("a duplicate must never run while the slow one is alive: {other:?}"),
        }
        attempts += 1;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(attempts > 10, "duplicates were tried throughout");
    let token = slow
        .await
        .expect("task")
        .expect("the slow operation completes");
    assert!(matches!(token, Ran::Executed(t) if t > 0));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let replay = engine
        .run(&c, |_| async { Ok::<_, PayError>(0u64) })
        .await
        .expect("replay");
    assert_eq!(replay, Ran::Replayed(*token.get()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_that_lost_its_lease_is_fenced_and_changes_nothing() {
    let store = MemoryStore::new();
    let lease = Duration::from_millis(150);
    let cut_off = Engine::new(
        Faults {
            renewals_cut_off: true,
            ..Faults::new()
        }
        .on(store.clone()),
    )
    .with_policy(Policy::default().lease(lease));
    let healthy =
        Engine::new(store.clone()).with_policy(Policy::default().lease(Duration::from_secs(30)));
    let c = call("fenced", &serde_json::json!("x"));

    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let first = {
        let c = c.clone();
        tokio::spawn(async move {
            cut_off
                .run(&c, |claim| async move {
                    let _ = go_rx.await;
                    Ok::<_, PayError>(("first".to_string(), claim.fencing_token()))
                })
                .await
        })
    };
    // The first holder stalls past its lease; a second instance takes over.
    idem_tests::until_lease_lapsed(&store, c.record_id(), "the first holder").await;
    let second = healthy
        .run(&c, |claim| async move {
            Ok::<_, PayError>(("second".to_string(), claim.fencing_token()))
        })
        .await
        .expect("the second instance takes the expired claim over");
    let Ran::Executed((who, second_token)) = second else {
        panic!("expected the second instance to execute, got {second:?}")
    };
    assert_eq!(who, "second");

    // The first holder wakes up and finishes: it is fenced off.
    let _ = go_tx.send(());
    let late = first.await.expect("task");
    match late {
        Err(Error::LeaseLost) => {}
        other => panic!("the stale holder must get LeaseLost, got {other:?}"),
    }
    // Nothing it did changed the record: the second result is replayed.
    let replay = healthy
        .run(&c, |_| async {
            Ok::<_, PayError>(("third".to_string(), idem_core::FencingToken(0)))
        })
        .await
        .expect("replay");
    assert_eq!(replay, Ran::Replayed(("second".to_string(), second_token)));
}

#[tokio::test]
async fn final_failures_are_recorded_and_transient_ones_released() {
    let engine = Engine::new(MemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let declined = call("declined", &serde_json::json!(1));
    for expect_replay in [false, true] {
        let runs = Arc::clone(&runs);
        let got = engine
            .run(&declined, |_| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Err::<u8, _>(PayError::Declined("insufficient funds".into()))
            })
            .await;
        match got {
            Err(Error::Failed(ran)) => {
                assert_eq!(ran.is_replayed(), expect_replay);
                assert_eq!(
                    ran.into_inner(),
                    PayError::Declined("insufficient funds".into())
                );
            }
            other => panic!("expected the final failure, got {other:?}"),
        }
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "a final failure is not run again"
    );

    let flaky = call("timeout", &serde_json::json!(1));
    let attempts = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let attempts = Arc::clone(&attempts);
        let got = engine
            .run(&flaky, |_| async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err::<u8, _>(PayError::Timeout)
            })
            .await;
        assert!(
            matches!(got, Err(Error::Failed(Ran::Executed(PayError::Timeout)))),
            "got {got:?}"
        );
    }
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "a transient failure releases the claim"
    );
    let ok = engine
        .run(&flaky, |_| async { Ok::<_, PayError>(5u8) })
        .await;
    assert_eq!(ok.expect("third try succeeds"), Ran::Executed(5));
}

#[tokio::test]
async fn key_reused_for_another_request_is_a_mismatch_and_runs_nothing() {
    let engine = Engine::new(MemoryStore::new());
    let first = call("reused", &serde_json::json!({"amount": 1000}));
    let other = call("reused", &serde_json::json!({"amount": 9999}));
    engine
        .run(&first, |_| async { Ok::<_, PayError>(1u8) })
        .await
        .expect("first");
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = Arc::clone(&ran);
    let got = engine
        .run(&other, |_| async move {
            r2.fetch_add(1, Ordering::SeqCst);
            Ok::<_, PayError>(2u8)
        })
        .await;
    assert!(matches!(got, Err(Error::Mismatch)), "got {got:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(got.unwrap_err().to_string().contains("different request"));
}

#[tokio::test]
async fn same_key_in_two_scopes_is_two_operations() {
    let engine = Engine::new(MemoryStore::new());
    let key = IdempotencyKey::parse("k-1").expect("key");
    let fp = Fingerprint::of("op", &1).expect("fp");
    let a = Call::new("account-a", key.clone(), fp);
    let b = Call::new("account-b", key, fp);
    assert_eq!(
        engine
            .run(&a, |_| async { Ok::<_, PayError>('a') })
            .await
            .expect("a"),
        Ran::Executed('a')
    );
    assert_eq!(
        engine
            .run(&b, |_| async { Ok::<_, PayError>('b') })
            .await
            .expect("b"),
        Ran::Executed('b')
    );
}

async fn wait_until_acquirable(store: &MemoryStore, c: &Call, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if let Ok(Begin::Acquired(l)) = store
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
            .await
        {
            store
                .release(c.record_id(), &l)
                .await
                .expect("release probe");
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Faults around a real `MemoryStore` (through the tests' one forwarding
/// store, `Hooked`): renewals that never reach it (an instance cut off from
/// the store, or frozen in a pause), a number of completions and releases
/// that find it unreachable (a short outage or a failover), and answers
/// that come late.
struct Faults {
    renewals_cut_off: bool,
    failing_completions: AtomicUsize,
    completions: AtomicUsize,
    /// How long `begin`'s answer takes to come back after the store acted.
    begin_answer_delay: Duration,
    failing_releases: AtomicUsize,
    releases: AtomicUsize,
    /// How long a release takes before it reaches the store.
    release_delay: Duration,
}

impl Faults {
    fn new() -> Self {
        Self {
            renewals_cut_off: false,
            failing_completions: AtomicUsize::new(0),
            completions: AtomicUsize::new(0),
            begin_answer_delay: Duration::ZERO,
            failing_releases: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            release_delay: Duration::ZERO,
        }
    }

    /// `memory` with these faults.
    fn on(self, memory: MemoryStore) -> Hooked<Faults> {
        Hooked::new(Arc::new(memory), self)
    }
}

/// Takes one from `left` if any is left: whether this call fails.
fn fails(left: &AtomicUsize) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl Hooks for Faults {
    async fn around<T: Send>(
        &self,
        transition: Transition<'_>,
        forward: impl std::future::Future<Output = Result<T, idem_core::StoreError>> + Send,
    ) -> Result<T, idem_core::StoreError> {
        let refused = |what| {
            Err(idem_core::StoreError::unavailable(
                what,
                "connection refused",
            ))
        };
        match transition {
            Transition::Begin(_) => {
                let answer = forward.await;
                if !self.begin_answer_delay.is_zero() {
                    tokio::time::sleep(self.begin_answer_delay).await;
                }
                answer
            }
            Transition::Complete(..) => {
                self.completions.fetch_add(1, Ordering::SeqCst);
                if fails(&self.failing_completions) {
                    return refused("complete");
                }
                forward.await
            }
            Transition::Release(..) => {
                self.releases.fetch_add(1, Ordering::SeqCst);
                if !self.release_delay.is_zero() {
                    tokio::time::sleep(self.release_delay).await;
                }
                if fails(&self.failing_releases) {
                    return refused("release");
                }
                forward.await
            }
            Transition::Renew(..) if self.renewals_cut_off => {
                Err(idem_core::StoreError::unavailable("renew", "cut off"))
            }
            Transition::Renew(..) => forward.await,
        }
    }
}

/// An engine (30 s lease) over a store whose next `failing`
/// completions find it unreachable.
fn engine_with_failing_completions(failing: usize) -> (Engine, Arc<Hooked<Faults>>) {
    let store = Arc::new(
        Faults {
            failing_completions: AtomicUsize::new(failing),
            ..Faults::new()
        }
        .on(MemoryStore::new()),
    );
    let engine = Engine::from_arc(Arc::clone(&store) as Arc<dyn Store>)
        .with_policy(Policy::default().lease(Duration::from_secs(30)));
    (engine, store)
}

/// A charge that counts its runs and names its receipt after the count.
fn charge(runs: &AtomicUsize) -> std::future::Ready<Result<String, PayError>> {
    let n = runs.fetch_add(1, Ordering::SeqCst);
    std::future::ready(Ok(format!("charge-{n}")))
}

/// Retries `c` until it replays (a retry while the record is not written yet
/// finds the claim in flight and runs nothing), for at most 20 seconds.
async fn replay_once_recorded(engine: &Engine, c: &Call, runs: &Arc<AtomicUsize>) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match engine.run(c, |_| charge(runs)).await {
            Ok(Ran::Replayed(r)) => return r,
            Err(Error::InFlight { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("a retry must wait for the record or replay it, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_is_recorded_in_the_background_when_the_store_comes_back_within_the_lease() {
    // Eight failed completions: more than the engine retries in line (four
    // attempts), so the answer goes out first and the record lands later.
    let (engine, store) = engine_with_failing_completions(8);
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("outage-at-completion", &serde_json::json!({"amount": 7}));

    let first = engine
        .run(&c, |_| charge(&runs))
        .await
        .expect("the operation ran and answered although its record was not written yet");
    assert_eq!(first, Ran::Executed("charge-0".to_owned()));
    let in_line = store.hooks().completions.load(Ordering::SeqCst);
    assert!(
        in_line < 8,
        "the answer must not wait for the outage to end ({in_line} attempts before answering)"
    );

    let replayed = replay_once_recorded(&engine, &c, &runs).await;
    assert_eq!(replayed, "charge-0", "the retry gets the first charge back");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the charge ran once");
    assert!(store.hooks().completions.load(Ordering::SeqCst) >= 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_is_recorded_in_the_background_when_the_caller_goes_away_during_an_outage() {
    // The store fails four completions. The caller gives up (a client that
    // disconnects drops the handler) while the engine is still retrying in
    // line, after two: the charge has happened, so its result must still be
    // recorded, which takes more than the one attempt made on the way out.
    let (engine, _store) = engine_with_failing_completions(4);
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call(
        "caller-gone-at-completion",
        &serde_json::json!({"amount": 9}),
    );

    let gone =
        tokio::time::timeout(Duration::from_millis(50), engine.run(&c, |_| charge(&runs))).await;
    assert!(
        gone.is_err(),
        "the caller must leave during the in-line retries: {gone:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the charge ran");

    let replayed = replay_once_recorded(&engine, &c, &runs).await;
    assert_eq!(replayed, "charge-0", "the retry gets the first charge back");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the charge ran once");
}

/// Waits (up to a second) until `call`'s key can be claimed again.
async fn claimable_again(engine: &Engine, c: &Call) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        match engine.begin(c).await {
            Ok(idem_core::adapter::Begun::Claimed(_)) => return true,
            _ if tokio::time::Instant::now() >= deadline => return false,
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_taken_and_dropped_before_anything_ran_is_released_for_the_retry() {
    // The lease is long: only a release frees the key within the second.
    let engine = Engine::new(MemoryStore::new())
        .with_policy(Policy::default().lease(Duration::from_mins(1)));
    let c = call("taken-then-dropped", &serde_json::json!({"amount": 5}));
    match engine.begin(&c).await.expect("begin") {
        idem_core::adapter::Begun::Claimed(claimed) => drop(claimed),
        idem_core::adapter::Begun::Replayed(_) => panic!("a new key replayed"),
    }
    assert!(
        claimable_again(&engine, &c).await,
        "the dropped claim was kept: the retry would wait out the lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_run_under_another_call_runs_nothing_and_is_released() {
    let engine = Engine::new(MemoryStore::new())
        .with_policy(Policy::default().lease(Duration::from_mins(1)));
    let taken = call("claimed-for-this", &serde_json::json!({"amount": 5}));
    let other = call("run-for-that", &serde_json::json!({"amount": 5}));
    let idem_core::adapter::Begun::Claimed(claimed) = engine.begin(&taken).await.expect("begin")
    else {
        panic!("a new key replayed");
    };
    let ran = Arc::new(AtomicUsize::new(0));
    let result = engine
        .execute_claimed(&other, claimed, |_| {
            let ran = Arc::clone(&ran);
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                idem_core::adapter::Completion::Record {
                    value: (),
                    outcome: idem_core::Outcome::new(b"done".to_vec()),
                }
            }
        })
        .await;
    assert!(matches!(result, Err(Error::LeaseLost)), "{result:?}");
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "nothing runs under a claim for another call"
    );
    assert!(
        claimable_again(&engine, &taken).await,
        "the claim was released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_begun_then_executed_records_once_and_its_retry_replays() {
    let engine = Engine::new(MemoryStore::new());
    let c = call("begun-then-run", &serde_json::json!({"amount": 5}));
    let idem_core::adapter::Begun::Claimed(claimed) = engine.begin(&c).await.expect("begin") else {
        panic!("a new key replayed");
    };
    // A duplicate meanwhile is told the call is in flight.
    assert!(matches!(
        engine
            .begin(&c.clone().on_in_flight(OnInFlight::Reject))
            .await,
        Err(Error::InFlight { .. })
    ));
    let executed = engine
        .execute_claimed(&c, claimed, |_| async {
            idem_core::adapter::Completion::Record {
                value: "receipt",
                outcome: idem_core::Outcome::new(b"receipt".to_vec()),
            }
        })
        .await
        .expect("runs");
    assert!(matches!(
        executed,
        idem_core::adapter::Execution::Executed("receipt")
    ));
    match engine.begin(&c).await.expect("retry") {
        idem_core::adapter::Begun::Replayed(outcome) => assert_eq!(outcome.as_bytes(), b"receipt"),
        idem_core::adapter::Begun::Claimed(_) => panic!("the retry was given a new claim"),
    }
}
