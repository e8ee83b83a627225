//! Model-based test of the real stores: Redis, Redis Cluster and
//! PostgreSQL, driven with random sequences of begin, complete, release,
//! renew, remove and clock advances, every answer compared with
//! `idem_core::machine::step` applied to the same sequence.
//!
//! The stores keep time by their own clocks, so the model is made to agree
//! with any real clock: every duration is either short (10 ms) or long
//! (10 minutes), an advance is a real pause of 60 ms, and every operation
//! with a short duration is followed at once by an advance. A short lease
//! or record has thus ended, by the store's clock and by the model's,
//! before the next operation; a long one lives through the whole sequence.
//! Nothing is ever asked near a deadline, where a real clock and the
//! model's could disagree.
//!
//! Tokens come from the clocks too: a store's lease and the model's are
//! kept side by side, each presented to its own side, and a store's tokens
//! must grow for each key.

use std::collections::HashMap;
use std::time::Duration;

use idem_core::machine::{self, Answer, Effect, Event, Record};
use idem_core::store::Begin;
use idem_core::{Fingerprint, IdempotencyKey, Lease, Outcome, RecordId, Removal, Scope, Store};
use idem_redis::RedisStore;
use idem_tests::{mysql_store, pg_store, redis_cluster_nodes, redis_url, unique_prefix};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const SHORT: Duration = Duration::from_millis(10);
const LONG: Duration = Duration::from_mins(10);
const ADVANCE: Duration = Duration::from_millis(60);
/// How long the stores trace an expired record: their default.
const TRACE: Duration = Duration::from_hours(24);

#[derive(Clone, Debug)]
enum Op {
    Begin {
        key: u8,
        fp: u8,
        short: bool,
    },
    Complete {
        key: u8,
        lease: usize,
        outcome: u8,
        short: bool,
    },
    Release {
        key: u8,
        lease: usize,
    },
    Renew {
        key: u8,
        lease: usize,
        short: bool,
    },
    Remove {
        key: u8,
        force: bool,
    },
    Advance,
}

impl Op {
    /// Whether a pause follows the operation (its duration is short).
    fn advances(&self) -> bool {
        matches!(
            self,
            Op::Advance
                | Op::Begin { short: true, .. }
                | Op::Complete { short: true, .. }
                | Op::Renew { short: true, .. }
        )
    }
}

fn op() -> impl Strategy<Value = Op> {
    // Mostly long durations: short ones pause the sequence.
    let short = || prop::bool::weighted(0.2);
    prop_oneof![
        4 => (0..3u8, 0..2u8, short()).prop_map(|(key, fp, short)| Op::Begin { key, fp, short }),
        3 => (0..3u8, 0..4usize, any::<u8>(), short())
            .prop_map(|(key, lease, outcome, short)| Op::Complete { key, lease, outcome, short }),
        2 => (0..3u8, 0..4usize).prop_map(|(key, lease)| Op::Release { key, lease }),
        2 => (0..3u8, 0..4usize, short()).prop_map(|(key, lease, short)| Op::Renew { key, lease, short }),
        1 => (0..3u8, any::<bool>()).prop_map(|(key, force)| Op::Remove { key, force }),
        1 => Just(Op::Advance),
    ]
}

fn length(short: bool) -> Duration {
    if short {
        SHORT
    } else {
        LONG
    }
}

/// An answer, the same from a store and from the model: tokens and
/// retry-after durations are each side's own.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    Acquired,
    InFlight,
    Replay(Vec<u8>),
    Mismatch,
    Expired,
    Completed,
    Released,
    Renewed,
    LeaseLost,
    Removed,
    RemoveRefused,
    Absent,
}

fn said(answer: Answer) -> Said {
    match answer {
        Answer::Begin(Begin::Acquired(_)) => Said::Acquired,
        Answer::Begin(Begin::InFlight { .. }) => Said::InFlight,
        Answer::Begin(Begin::Replay(o)) => Said::Replay(o.into_bytes()),
        Answer::Begin(Begin::Mismatch) => Said::Mismatch,
        Answer::Begin(Begin::Expired) => Said::Expired,
        Answer::Completed => Said::Completed,
        Answer::Released => Said::Released,
        Answer::Renewed(_) => Said::Renewed,
        Answer::LeaseLost => Said::LeaseLost,
        Answer::Removed => Said::Removed,
        Answer::RemoveRefused => Said::RemoveRefused,
        Answer::Absent => Said::Absent,
    }
}

/// The model: `machine::step` over its own records and clock.
struct Model {
    now: u64,
    records: HashMap<u8, Record>,
}

impl Model {
    fn step(&mut self, key: u8, event: Event<'_>) -> Answer {
        let (answer, effect) = machine::step(self.records.get(&key), self.now, event);
        if let Effect::Put(record) = effect {
            self.records.insert(key, record);
        }
        answer
    }
}

/// The leases granted for each key, in order: the store's and the model's.
type Granted = HashMap<u8, Vec<(Lease, Lease)>>;

fn fingerprint(n: u8) -> Fingerprint {
    Fingerprint::builder("store-model")
        .bytes("n", &[n])
        .finish()
}

fn outcome(n: u8) -> Outcome {
    Outcome::new(vec![n; usize::from(n % 5)])
}

/// Runs one sequence against `store`, its keys unique to `case`.
async fn run(store: &dyn Store, case: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let scope = Scope::new(format!("case-{case}"));
    let mut model = Model {
        now: 1_000_000_000,
        records: HashMap::new(),
    };
    let mut granted: Granted = HashMap::new();
    for (step, op) in ops.iter().enumerate() {
        // An operation naming a lease never granted is skipped by both.
        if let Some((store_said, model_said)) =
            both_say(store, &scope, &mut model, &mut granted, op, step).await?
        {
            prop_assert_eq!(
                store_said,
                model_said,
                "step {}: {:?}: the store disagrees with machine::step",
                step,
                op
            );
        }
        if op.advances() {
            tokio::time::sleep(ADVANCE).await;
            model.now += machine::micros(ADVANCE);
        }
    }
    Ok(())
}

fn record_id(scope: &Scope, key: u8) -> RecordId {
    let key = IdempotencyKey::parse(&format!("key-{key}")).expect("a valid key");
    RecordId::new(scope, &key)
}

/// Keeps the leases a begin granted on both sides; the store's tokens
/// must grow for each key.
fn granted_both(
    granted: &mut Granted,
    key: u8,
    answer: &Begin,
    expected: &Answer,
    step: usize,
) -> Result<(), TestCaseError> {
    if let (Begin::Acquired(ours), Answer::Begin(Begin::Acquired(its))) = (answer, expected) {
        let list = granted.entry(key).or_default();
        if let Some((previous, _)) = list.last() {
            prop_assert!(
                ours.token > previous.token,
                "step {}: the store's token did not grow",
                step
            );
        }
        list.push((*ours, *its));
    }
    Ok(())
}

/// What the store and the model answer to `op`.
async fn both_say(
    store: &dyn Store,
    scope: &Scope,
    model: &mut Model,
    granted: &mut Granted,
    op: &Op,
    step: usize,
) -> Result<Option<(Said, Said)>, TestCaseError> {
    let id = |key: u8| record_id(scope, key);
    let fail = |e: &dyn std::fmt::Display| {
        TestCaseError::fail(format!("step {step}: {op:?}: the store failed: {e}"))
    };
    let leases = |key: u8, i: usize| granted.get(&key).and_then(|l| l.get(i)).copied();
    Ok(Some(match *op {
        Op::Begin { key, fp, short } => {
            let answer = store
                .begin(&id(key), &fingerprint(fp), length(short))
                .await
                .map_err(|e| fail(&e))?;
            let expected = model.step(
                key,
                Event::Begin {
                    fingerprint: &fingerprint(fp),
                    lease: length(short),
                },
            );
            granted_both(granted, key, &answer, &expected, step)?;
            (said(Answer::Begin(answer)), said(expected))
        }
        Op::Complete {
            key,
            lease,
            outcome: n,
            short,
        } => {
            let Some((ours, its)) = leases(key, lease) else {
                return Ok(None);
            };
            let (o, ttl) = (outcome(n), length(short));
            let answer = match store.complete(&id(key), &ours, &o, ttl).await {
                Ok(()) => Said::Completed,
                Err(e) if e.is_lease_lost() => Said::LeaseLost,
                Err(e) => return Err(fail(&e)),
            };
            let event = Event::Complete {
                lease: &its,
                outcome: &o,
                ttl,
                // The stores' default: an expired record (a short one) is
                // traced through the whole sequence.
                trace: TRACE,
            };
            (answer, said(model.step(key, event)))
        }
        Op::Release { key, lease } => {
            let Some((ours, its)) = leases(key, lease) else {
                return Ok(None);
            };
            let answer = match store.release(&id(key), &ours).await {
                Ok(()) => Said::Released,
                Err(e) if e.is_lease_lost() => Said::LeaseLost,
                Err(e) => return Err(fail(&e)),
            };
            (
                answer,
                said(model.step(key, Event::Release { lease: &its })),
            )
        }
        Op::Renew { key, lease, short } => {
            let Some((ours, its)) = leases(key, lease) else {
                return Ok(None);
            };
            let duration = length(short);
            let answer = match store.renew(&id(key), &ours, duration).await {
                Ok(renewed) => {
                    prop_assert_eq!(
                        renewed.token,
                        ours.token,
                        "step {}: renewal changed the token",
                        step
                    );
                    Said::Renewed
                }
                Err(e) if e.is_lease_lost() => Said::LeaseLost,
                Err(e) => return Err(fail(&e)),
            };
            (
                answer,
                said(model.step(
                    key,
                    Event::Renew {
                        lease: &its,
                        duration,
                    },
                )),
            )
        }
        Op::Remove { key, force } => {
            let answer = match store.remove(&id(key), force).await.map_err(|e| fail(&e))? {
                Removal::Removed => Said::Removed,
                Removal::RefusedInFlight => Said::RemoveRefused,
                Removal::Absent => Said::Absent,
            };
            (answer, said(model.step(key, Event::Remove { force })))
        }
        Op::Advance => (Said::Absent, Said::Absent),
    }))
}

/// Drives the store that `make` connects with `cases` random sequences of
/// up to 24 operations, on one runtime.
fn check<S: Store, F: std::future::Future<Output = S>>(make: impl FnOnce() -> F, cases: u32) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let store = runtime.block_on(make());
    let mut runner = TestRunner::new(Config {
        cases,
        // A shrunk sequence runs against the same store, with keys of its
        // own: shrinking stays cheap and meaningful.
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::cell::Cell::new(0usize);
    let outcome = runner.run(&prop::collection::vec(op(), 1..24), |ops| {
        case.set(case.get() + 1);
        runtime.block_on(run(&store, case.get(), &ops))
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

#[test]
fn redis_answers_as_the_transition_table_does() {
    check(
        || async {
            RedisStore::connect(&redis_url())
                .await
                .expect("Redis at IDEM_TEST_REDIS_URL (default redis://127.0.0.1:6379)")
                .with_prefix(&unique_prefix("store-model"))
        },
        32,
    );
}

#[test]
fn redis_with_compact_keys_answers_as_the_transition_table_does() {
    check(
        || async {
            RedisStore::connect(&redis_url())
                .await
                .expect("Redis at IDEM_TEST_REDIS_URL (default redis://127.0.0.1:6379)")
                .with_prefix(&unique_prefix("store-model"))
                .with_key_layout(idem_redis::KeyLayout::Compact)
        },
        32,
    );
}

#[test]
fn valkey_answers_as_the_transition_table_does() {
    check(
        || async {
            RedisStore::connect(&idem_tests::valkey_url())
                .await
                .expect("Valkey at IDEM_TEST_VALKEY_URL (default redis://127.0.0.1:6380)")
                .with_prefix(&unique_prefix("store-model"))
        },
        32,
    );
}

#[test]
fn valkey_cluster_answers_as_the_transition_table_does() {
    check(
        || async {
            RedisStore::connect_cluster(idem_tests::valkey_cluster_nodes())
                .await
                .expect("Valkey Cluster at IDEM_TEST_VALKEY_CLUSTER (default 127.0.0.1:7501-7503)")
                .with_prefix(&unique_prefix("store-model"))
        },
        32,
    );
}

#[test]
fn redis_cluster_answers_as_the_transition_table_does() {
    check(
        || async {
            RedisStore::connect_cluster(redis_cluster_nodes())
                .await
                .expect("Redis Cluster at IDEM_TEST_REDIS_CLUSTER (default 127.0.0.1:7301-7303)")
                .with_prefix(&unique_prefix("store-model"))
        },
        32,
    );
}

#[test]
fn postgres_answers_as_the_transition_table_does() {
    check(pg_store, 32);
}

#[test]
fn mariadb_answers_as_the_transition_table_does() {
    check(mysql_store, 32);
}

#[test]
fn sqlite_answers_as_the_transition_table_does() {
    check(idem_tests::sqlite_store, 32);
}

#[test]
fn dynamodb_answers_as_the_transition_table_does() {
    check(idem_tests::dynamo_store, 32);
}
