//! Property test: `MemoryStore` against a model of the transition table
//! written independently, over random sequences of begin, complete, release,
//! renew, purge and clock advances. Every answer must agree, late retries
//! of expired records (refused while their trace lasts) included.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use idem_core::memory::ManualClock;
use idem_core::store::Begin;
use idem_core::{Fingerprint, IdempotencyKey, Lease, MemoryStore, Outcome, RecordId, Scope, Store};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Begin {
        key: u8,
        fp: u8,
        lease_ms: u64,
    },
    Complete {
        key: u8,
        lease: usize,
        outcome: u8,
        ttl_ms: u64,
    },
    Release {
        key: u8,
        lease: usize,
    },
    Renew {
        key: u8,
        lease: usize,
        ms: u64,
    },
    Advance {
        ms: u64,
    },
    Purge,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3u8, 0..2u8, 1..100u64).prop_map(|(key, fp, lease_ms)| Op::Begin { key, fp, lease_ms }),
        2 => (0..3u8, 0..6usize, any::<u8>(), 1..200u64)
            .prop_map(|(key, lease, outcome, ttl_ms)| Op::Complete { key, lease, outcome, ttl_ms }),
        1 => (0..3u8, 0..6usize).prop_map(|(key, lease)| Op::Release { key, lease }),
        1 => (0..3u8, 0..6usize, 1..100u64).prop_map(|(key, lease, ms)| Op::Renew { key, lease, ms }),
        2 => (0..120u64).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Purge),
    ]
}

/// The model's view of one record. `holder` identifies the claim by the order
/// in which leases were granted for the key, not by the store's token.
#[derive(Clone, Debug)]
struct ModelRecord {
    fp: u8,
    holder: usize,
    completed: Option<Vec<u8>>,
    until_us: u64,
}

/// How long the store keeps a trace of an expired record.
const TRACE_MS: u64 = 150;

#[derive(Debug, PartialEq)]
enum Said {
    Acquired,
    InFlight(Duration),
    Replay(Vec<u8>),
    Mismatch,
    Expired,
    Ok,
    LeaseLost,
}

#[derive(Default)]
struct Model {
    now_us: u64,
    records: HashMap<u8, ModelRecord>,
    granted: HashMap<u8, usize>,
}

impl Model {
    fn live(&self, key: u8) -> Option<&ModelRecord> {
        self.records.get(&key).filter(|r| r.until_us > self.now_us)
    }

    /// A completed record past its lifetime whose trace still lasts.
    fn traced(&self, key: u8) -> Option<&ModelRecord> {
        self.records.get(&key).filter(|r| {
            r.completed.is_some()
                && r.until_us <= self.now_us
                && r.until_us + TRACE_MS * 1000 > self.now_us
        })
    }

    fn holds(&self, key: u8, lease: usize) -> bool {
        self.live(key)
            .is_some_and(|r| r.holder == lease && r.completed.is_none())
    }

    fn apply(&mut self, op: &Op) -> Option<Said> {
        let now = self.now_us;
        Some(match *op {
            Op::Begin { key, fp, .. } if self.traced(key).is_some() => {
                if self.traced(key).is_some_and(|r| r.fp == fp) {
                    Said::Expired
                } else {
                    Said::Mismatch
                }
            }
            Op::Begin { key, fp, lease_ms } => match self.live(key).cloned() {
                Some(r) if r.fp != fp => Said::Mismatch,
                Some(r) => match r.completed {
                    Some(bytes) => Said::Replay(bytes),
                    None => Said::InFlight(Duration::from_micros(r.until_us - now)),
                },
                None => {
                    let n = self.granted.entry(key).or_default();
                    let holder = *n;
                    *n += 1;
                    self.records.insert(
                        key,
                        ModelRecord {
                            fp,
                            holder,
                            completed: None,
                            until_us: now + lease_ms * 1000,
                        },
                    );
                    Said::Acquired
                }
            },
            Op::Complete {
                key,
                lease,
                outcome,
                ttl_ms,
            } => {
                let done_by_same = self
                    .live(key)
                    .is_some_and(|r| r.holder == lease && r.completed.is_some());
                if done_by_same {
                    Said::Ok
                } else if self.holds(key, lease) {
                    let r = self.records.get_mut(&key).expect("held");
                    r.completed = Some(vec![outcome; usize::from(outcome % 5)]);
                    r.until_us = now + ttl_ms * 1000;
                    Said::Ok
                } else {
                    Said::LeaseLost
                }
            }
            Op::Release { key, lease } => {
                if self.holds(key, lease) {
                    self.records.remove(&key);
                    Said::Ok
                } else {
                    Said::LeaseLost
                }
            }
            Op::Renew { key, lease, ms } => {
                if self.holds(key, lease) {
                    self.records.get_mut(&key).expect("held").until_us = now + ms * 1000;
                    Said::Ok
                } else {
                    Said::LeaseLost
                }
            }
            Op::Advance { ms } => {
                self.now_us += ms * 1000;
                return None;
            }
            Op::Purge => return None,
        })
    }
}

fn lease_of(leases: &HashMap<u8, Vec<Lease>>, key: u8, i: usize) -> Option<Lease> {
    leases.get(&key).and_then(|l| l.get(i)).copied()
}

fn id(key: u8) -> RecordId {
    RecordId::new(
        &Scope::new("model"),
        &IdempotencyKey::parse(&format!("key-{key}")).expect("key"),
    )
}

fn fp(n: u8) -> Fingerprint {
    Fingerprint::builder("model").bytes("n", &[n]).finish()
}

/// What the store answers to `op`; `None` for ops without an answer.
async fn store_says(
    store: &MemoryStore,
    clock: &ManualClock,
    leases: &mut HashMap<u8, Vec<Lease>>,
    op: &Op,
    step: usize,
) -> Result<Option<Said>, TestCaseError> {
    Ok(match *op {
        Op::Begin {
            key,
            fp: f,
            lease_ms,
        } => {
            match store
                .begin(&id(key), &fp(f), Duration::from_millis(lease_ms))
                .await
            {
                Ok(Begin::Acquired(lease)) => {
                    let granted = leases.entry(key).or_default();
                    if let Some(prev) = granted.last() {
                        prop_assert!(lease.token > prev.token, "step {step}: token did not grow");
                    }
                    granted.push(lease);
                    Some(Said::Acquired)
                }
                Ok(Begin::InFlight { retry_after }) => Some(Said::InFlight(retry_after)),
                Ok(Begin::Replay(o)) => Some(Said::Replay(o.into_bytes())),
                Ok(Begin::Mismatch) => Some(Said::Mismatch),
                Ok(Begin::Expired) => Some(Said::Expired),
                Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
            }
        }
        Op::Complete {
            key,
            lease,
            outcome,
            ttl_ms,
        } => match lease_of(leases, key, lease) {
            None => None,
            Some(l) => Some(
                match store
                    .complete(
                        &id(key),
                        &l,
                        &Outcome::new(vec![outcome; usize::from(outcome % 5)]),
                        Duration::from_millis(ttl_ms),
                    )
                    .await
                {
                    Ok(()) => Said::Ok,
                    Err(e) if e.is_lease_lost() => Said::LeaseLost,
                    Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
                },
            ),
        },
        Op::Release { key, lease } => match lease_of(leases, key, lease) {
            None => None,
            Some(l) => Some(match store.release(&id(key), &l).await {
                Ok(()) => Said::Ok,
                Err(e) if e.is_lease_lost() => Said::LeaseLost,
                Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
            }),
        },
        Op::Renew { key, lease, ms } => match lease_of(leases, key, lease) {
            None => None,
            Some(l) => Some(
                match store.renew(&id(key), &l, Duration::from_millis(ms)).await {
                    Ok(renewed) => {
                        prop_assert_eq!(
                            renewed.token,
                            l.token,
                            "step {}: renewal changed the token",
                            step
                        );
                        Said::Ok
                    }
                    Err(e) if e.is_lease_lost() => Said::LeaseLost,
                    Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
                },
            ),
        },
        Op::Advance { ms } => {
            clock.advance(Duration::from_millis(ms));
            None
        }
        Op::Purge => {
            store.purge_expired();
            None
        }
    })
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    const START_US: u64 = 1_700_000_000_000_000;
    let clock = Arc::new(ManualClock::new(START_US));
    let store = MemoryStore::builder()
        .clock(Arc::clone(&clock))
        .shards(2)
        .purge_interval(None)
        .expired_trace(Duration::from_millis(TRACE_MS))
        .build();
    let mut model = Model {
        now_us: START_US,
        ..Model::default()
    };
    // Leases granted by the store, per key, in grant order (the model's holder ids).
    let mut leases: HashMap<u8, Vec<Lease>> = HashMap::new();
    for (step, op) in ops.iter().enumerate() {
        // Ops naming a lease the store never granted are skipped by both sides.
        let skipped = matches!(
            *op,
            Op::Complete { key, lease, .. } | Op::Release { key, lease } | Op::Renew { key, lease, .. }
                if lease_of(&leases, key, lease).is_none()
        );
        let said = store_says(&store, &clock, &mut leases, op, step).await?;
        let expected = if skipped { None } else { model.apply(op) };
        prop_assert_eq!(
            said,
            expected,
            "step {}: {:?} disagrees with the model",
            step,
            op
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(run(ops))?;
    }
}
