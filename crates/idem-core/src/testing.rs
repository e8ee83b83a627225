//! The store conformance kit: the checks that every [`Store`] must pass.
//!
//! A store proves that it keeps the transition table of
//! [`machine::step`](crate::machine::step) by passing every check here against
//! a real backend. Each check works on record ids of its own, so the checks can
//! share one store (one Redis database, one PostgreSQL schema) and run in
//! parallel. Checks panic with a message that names the broken rule.
//!
//! The simplest use is the [`store_conformance_tests!`](crate::store_conformance_tests)
//! macro, which writes one `#[test]` per check:
//!
//! ```
//! idem_core::store_conformance_tests!(|| async { idem_core::MemoryStore::new() });
//! ```
//!
//! Expiry checks wait on the store's real clock, with leases and TTLs of a few
//! hundred milliseconds.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::store::{Begin, Lease, Outcome, Store};

/// Runs one check on a store made by `make`, in a fresh multi-threaded runtime.
/// Used by [`store_conformance_tests!`](crate::store_conformance_tests).
pub fn run_check<M, MF, S, C, CF>(make: M, check: C)
where
    M: FnOnce() -> MF,
    MF: Future<Output = S>,
    S: Store,
    C: FnOnce(Arc<dyn Store>) -> CF,
    CF: Future<Output = ()>,
{
    run_check_keeping(make, replays::DEFAULT_LARGEST, check);
}

/// [`run_check`] for a store that keeps outcomes of at most `largest`
/// bytes (DynamoDB's items): the replay check records one that large, and
/// one a byte larger must be refused as full, not cut short. Used by
/// `store_conformance_tests!(make, largest_outcome = n)`.
pub fn run_check_keeping<M, MF, S, C, CF>(make: M, largest: usize, check: C)
where
    M: FnOnce() -> MF,
    MF: Future<Output = S>,
    S: Store,
    C: FnOnce(Arc<dyn Store>) -> CF,
    CF: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("conformance kit: cannot build a tokio runtime");
    rt.block_on(replays::keeping(largest, async move {
        let store: Arc<dyn Store> = Arc::new(make().await);
        check(store).await;
    }));
}

/// The list of checks, kept once: calls `$callback!` with the given prefix
/// and every check's name.
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_conformance_checks {
    ($callback:path { $($prefix:tt)* }) => {
        $callback! { $($prefix)*
            begin_on_absent_acquires,
            duplicate_in_flight_answers_in_flight,
            other_fingerprint_in_flight_is_a_mismatch,
            replay_is_byte_identical,
            other_fingerprint_after_completion_is_a_mismatch,
            release_lets_a_retry_acquire,
            wrong_token_is_fenced,
            expired_lease_is_taken_over_and_old_holder_fenced,
            renew_keeps_the_claim,
            a_late_retry_is_refused_until_the_trace_is_removed,
            complete_twice_keeps_the_first_outcome,
            completed_record_cannot_be_released,
            concurrent_begins_acquire_once,
            records_are_independent,
            tokens_increase,
            expired_record_is_taken_over_once,
            renewed_claim_is_never_abandoned,
            completion_keeps_the_fingerprint,
            completion_of_another_record_is_refused,
            different_keys_never_share_a_record,
            inspect_shows_the_record,
            remove_refuses_a_claim_unless_forced,
            remove_of_a_completion_lets_the_key_run_again,
            replays_repeat_until_the_record_is_removed,
        }
    };
}

/// Writes one `#[test]` per conformance check for the store made by the given
/// expression, a closure returning a future of the store. A store that
/// keeps outcomes of at most some bytes (DynamoDB's items) says so with
/// `largest_outcome = n`: its replays are checked up to that size, and one
/// byte more must be refused as full.
///
/// ```
/// idem_core::store_conformance_tests!(|| async { idem_core::MemoryStore::new() });
/// ```
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!($make, largest_outcome = 1 << 20);
    };
    ($make:expr, largest_outcome = $largest:expr) => {
        $crate::__idem_conformance_checks!($crate::store_conformance_tests {
            @each $make; $largest;
        });
    };
    (@each $make:expr; $largest:expr; $($check:ident),+ $(,)?) => {
        $(
            #[test]
            fn $check() {
                $crate::testing::run_check_keeping(
                    $make,
                    $largest,
                    $crate::testing::checks::$check,
                );
            }
        )+
    };
}

/// Runs every check, one after the other, on stores made by `make`.
pub async fn run_all<M, MF, S>(make: M)
where
    M: Fn() -> MF,
    MF: Future<Output = S>,
    S: Store,
{
    macro_rules! all {
        ($($check:ident),+ $(,)?) => {
            $( checks::$check(Arc::new(make().await)).await; )+
        };
    }
    crate::__idem_conformance_checks!(all {});
}

mod known_bugs;
mod late_retries;
mod operations;
mod replays;
mod support;

pub use support::{fp, fresh_id};

/// The individual checks. Each takes the store under test.
pub mod checks {
    use super::{fp, fresh_id, Arc, Begin, Duration, Lease, Outcome, Store};

    pub use super::known_bugs::{
        completion_keeps_the_fingerprint, completion_of_another_record_is_refused,
        different_keys_never_share_a_record, expired_record_is_taken_over_once,
        renewed_claim_is_never_abandoned,
    };
    pub use super::late_retries::a_late_retry_is_refused_until_the_trace_is_removed;
    pub use super::operations::{
        inspect_shows_the_record, remove_of_a_completion_lets_the_key_run_again,
        remove_refuses_a_claim_unless_forced, replays_repeat_until_the_record_is_removed,
    };
    pub use super::replays::replay_is_byte_identical;

    use super::support::{acquire, expect_lease_lost, race, LONG, TTL};

    /// `begin` on a record that does not exist acquires it with the lease asked for.
    pub async fn begin_on_absent_acquires(store: Arc<dyn Store>) {
        let id = fresh_id("absent");
        let lease = acquire(&*store, &id, 1, LONG).await;
        assert_eq!(
            lease.duration, LONG,
            "the lease carries the duration asked for"
        );
    }

    /// A duplicate while the first holder's lease is alive answers `InFlight`
    /// with the time left on that lease.
    pub async fn duplicate_in_flight_answers_in_flight(store: Arc<dyn Store>) {
        let id = fresh_id("dup");
        acquire(&*store, &id, 1, LONG).await;
        match store.begin(&id, &fp(1), LONG).await {
            Ok(Begin::InFlight { retry_after }) => assert!(
                retry_after > Duration::ZERO && retry_after <= LONG,
                "retry_after must be the time left on the lease (0, {LONG:?}], got {retry_after:?}"
            ),
            other => panic!("a duplicate in flight must answer InFlight, got {other:?}"),
        }
    }

    /// A different request under a key in flight answers `Mismatch`.
    pub async fn other_fingerprint_in_flight_is_a_mismatch(store: Arc<dyn Store>) {
        let id = fresh_id("mismatch-in-flight");
        acquire(&*store, &id, 1, LONG).await;
        let got = store.begin(&id, &fp(2), LONG).await;
        assert!(
            matches!(got, Ok(Begin::Mismatch)),
            "another fingerprint while in flight must answer Mismatch, got {got:?}"
        );
    }

    /// A different request under a completed key answers `Mismatch`, not the
    /// first answer.
    pub async fn other_fingerprint_after_completion_is_a_mismatch(store: Arc<dyn Store>) {
        let id = fresh_id("mismatch-done");
        let lease = acquire(&*store, &id, 1, LONG).await;
        store
            .complete(&id, &lease, &Outcome::new(b"secret".to_vec()), TTL)
            .await
            .expect("complete by the holder must succeed");
        let got = store.begin(&id, &fp(2), LONG).await;
        assert!(
            matches!(got, Ok(Begin::Mismatch)),
            "another fingerprint after completion must answer Mismatch, got {got:?}"
        );
    }

    /// After a release the record is free: a retry acquires with a greater token.
    pub async fn release_lets_a_retry_acquire(store: Arc<dyn Store>) {
        let id = fresh_id("release");
        let first = acquire(&*store, &id, 1, LONG).await;
        store
            .release(&id, &first)
            .await
            .expect("release by the holder must succeed");
        let second = acquire(&*store, &id, 1, LONG).await;
        assert!(
            second.token > first.token,
            "a new claim must carry a greater fencing token ({} then {})",
            first.token,
            second.token
        );
        expect_lease_lost(
            "release of an already released lease",
            store.release(&id, &first),
        )
        .await;
    }

    /// Complete, release and renew with a token that is not the live one fail
    /// with `LeaseLost` and change nothing.
    pub async fn wrong_token_is_fenced(store: Arc<dyn Store>) {
        let id = fresh_id("fenced");
        let lease = acquire(&*store, &id, 1, LONG).await;
        let forged = Lease {
            token: crate::FencingToken(lease.token.0 + 1),
            duration: LONG,
        };
        let junk = Outcome::new(b"forged".to_vec());
        expect_lease_lost(
            "complete with a wrong token",
            store.complete(&id, &forged, &junk, TTL),
        )
        .await;
        expect_lease_lost("release with a wrong token", store.release(&id, &forged)).await;
        expect_lease_lost("renew with a wrong token", store.renew(&id, &forged, LONG)).await;
        let got = store.begin(&id, &fp(1), LONG).await;
        assert!(
            matches!(got, Ok(Begin::InFlight { .. })),
            "a fenced call must change nothing: the record must still be in flight, got {got:?}"
        );
        let real = Outcome::new(b"real".to_vec());
        store
            .complete(&id, &lease, &real, TTL)
            .await
            .expect("the true holder must still complete");
        let got = store.begin(&id, &fp(1), LONG).await;
        assert!(
            matches!(got, Ok(Begin::Replay(ref o)) if *o == real),
            "got {got:?}"
        );
        let unknown = fresh_id("fenced-absent");
        expect_lease_lost(
            "complete on a record that does not exist",
            store.complete(&unknown, &lease, &real, TTL),
        )
        .await;
        expect_lease_lost(
            "renew on a record that does not exist",
            store.renew(&unknown, &lease, LONG),
        )
        .await;
    }

    /// When a lease runs out, a retry takes the record over with a greater
    /// token (whatever its fingerprint), and the old holder is fenced off: its
    /// complete, renew and release fail with `LeaseLost` and change nothing.
    pub async fn expired_lease_is_taken_over_and_old_holder_fenced(store: Arc<dyn Store>) {
        let id = fresh_id("takeover");
        let short = Duration::from_millis(300);
        let old = acquire(&*store, &id, 1, short).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        expect_lease_lost(
            "renew after the lease ran out",
            store.renew(&id, &old, LONG),
        )
        .await;
        let new = match store.begin(&id, &fp(2), LONG).await {
            Ok(Begin::Acquired(lease)) => lease,
            other => panic!("begin after the lease ran out must take over, got {other:?}"),
        };
        assert!(
            new.token > old.token,
            "takeover must raise the token ({} then {})",
            old.token,
            new.token
        );
        let stale = Outcome::new(b"stale".to_vec());
        expect_lease_lost(
            "complete by the old holder",
            store.complete(&id, &old, &stale, TTL),
        )
        .await;
        expect_lease_lost("renew by the old holder", store.renew(&id, &old, LONG)).await;
        expect_lease_lost("release by the old holder", store.release(&id, &old)).await;
        let fresh = Outcome::new(b"fresh".to_vec());
        store
            .complete(&id, &new, &fresh, TTL)
            .await
            .expect("the new holder must complete");
        match store.begin(&id, &fp(2), LONG).await {
            Ok(Begin::Replay(o)) => {
                assert!(o == fresh, "the replay must be the new holder's outcome");
            }
            other => panic!("expected the new holder's replay, got {other:?}"),
        }
    }

    /// A renewed lease outlives its first deadline.
    pub async fn renew_keeps_the_claim(store: Arc<dyn Store>) {
        let id = fresh_id("renew");
        let lease = acquire(&*store, &id, 1, Duration::from_millis(500)).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let renewed = store
            .renew(&id, &lease, Duration::from_secs(5))
            .await
            .expect("renew by the holder must succeed");
        assert_eq!(renewed.token, lease.token, "renewal keeps the token");
        assert_eq!(
            renewed.duration,
            Duration::from_secs(5),
            "renewal reports the new duration"
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        let got = store.begin(&id, &fp(1), LONG).await;
        match got {
            Ok(Begin::InFlight { retry_after }) => assert!(
                retry_after > Duration::from_secs(2),
                "the renewed lease must count from the renewal, got {retry_after:?} left"
            ),
            other => panic!(
                "a renewed claim must still be in flight past its first deadline, got {other:?}"
            ),
        }
        store
            .complete(&id, &renewed, &Outcome::new(b"done".to_vec()), TTL)
            .await
            .expect("the renewed holder must complete");
    }

    /// Completing twice with the same lease succeeds and keeps the first
    /// outcome (a transactional completion followed by the engine's own).
    pub async fn complete_twice_keeps_the_first_outcome(store: Arc<dyn Store>) {
        let id = fresh_id("twice");
        let lease = acquire(&*store, &id, 1, LONG).await;
        let first = Outcome::new(b"first".to_vec());
        store
            .complete(&id, &lease, &first, TTL)
            .await
            .expect("first complete");
        store
            .complete(&id, &lease, &Outcome::new(b"second".to_vec()), TTL)
            .await
            .expect("completing again with the same lease must succeed");
        match store.begin(&id, &fp(1), LONG).await {
            Ok(Begin::Replay(o)) => assert!(o == first, "the first outcome must stay"),
            other => panic!("expected a replay, got {other:?}"),
        }
    }

    /// A completed record is never released, not even by its holder.
    pub async fn completed_record_cannot_be_released(store: Arc<dyn Store>) {
        let id = fresh_id("no-release");
        let lease = acquire(&*store, &id, 1, LONG).await;
        let out = Outcome::new(b"kept".to_vec());
        store
            .complete(&id, &lease, &out, TTL)
            .await
            .expect("complete");
        expect_lease_lost("release of a completed record", store.release(&id, &lease)).await;
        expect_lease_lost(
            "renew of a completed record",
            store.renew(&id, &lease, LONG),
        )
        .await;
        match store.begin(&id, &fp(1), LONG).await {
            Ok(Begin::Replay(o)) => assert!(o == out, "the record must be intact"),
            other => panic!("expected a replay, got {other:?}"),
        }
    }

    /// 64 concurrent begins of one key: exactly one `Acquired`, the rest `InFlight`.
    pub async fn concurrent_begins_acquire_once(store: Arc<dyn Store>) {
        let id = fresh_id("race");
        let (mut acquired, mut in_flight) = (0, 0);
        for answer in race(&store, id, 64).await {
            match answer {
                Ok(Begin::Acquired(_)) => acquired += 1,
                Ok(Begin::InFlight { .. }) => in_flight += 1,
                other => panic!("a concurrent begin answered {other:?}"),
            }
        }
        assert_eq!(
            acquired, 1,
            "exactly one of 64 concurrent begins may acquire"
        );
        assert_eq!(in_flight, 63, "the other 63 must see the claim in flight");
    }

    /// Two records never affect each other.
    pub async fn records_are_independent(store: Arc<dyn Store>) {
        let (a, b) = (fresh_id("a"), fresh_id("b"));
        let la = acquire(&*store, &a, 1, LONG).await;
        let lb = acquire(&*store, &b, 1, LONG).await;
        store
            .complete(&a, &la, &Outcome::new(b"A".to_vec()), TTL)
            .await
            .expect("complete a");
        let got = store.begin(&b, &fp(1), LONG).await;
        assert!(
            matches!(got, Ok(Begin::InFlight { .. })),
            "b must be untouched by a, got {got:?}"
        );
        expect_lease_lost("a's lease used on b", async {
            if la.token == lb.token {
                // Equal tokens are allowed across records; nothing to check.
                Err::<(), _>(crate::StoreError::lease_lost())
            } else {
                store
                    .complete(&b, &la, &Outcome::new(b"x".to_vec()), TTL)
                    .await
            }
        })
        .await;
    }

    /// Fencing tokens grow with every new claim on a record.
    pub async fn tokens_increase(store: Arc<dyn Store>) {
        let id = fresh_id("tokens");
        let mut last = None;
        for _ in 0..5 {
            let lease = acquire(&*store, &id, 1, LONG).await;
            if let Some(prev) = last {
                assert!(
                    lease.token > prev,
                    "tokens must grow: {prev} then {}",
                    lease.token
                );
            }
            last = Some(lease.token);
            store.release(&id, &lease).await.expect("release");
        }
    }
}
