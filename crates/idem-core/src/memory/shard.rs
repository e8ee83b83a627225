//! One shard of the memory store: its records, the completed ones in the
//! order they expire (what eviction and the purge take first), the ones in
//! flight, and what they weigh.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};

use std::sync::Arc;

use tokio::sync::Notify;

use crate::key::RecordId;
use crate::machine::{self, Answer, Effect, Event, Record, RecordState};

use super::id_hashing::IdHashing;

/// What one record weighs beyond its outcome's bytes: its address, the
/// record itself and its slot in the map, plus its entry in the expiry index
/// once completed, or in the set of records in flight before. An estimate of
/// the heap it holds, not a measurement.
const BASE: usize = std::mem::size_of::<RecordId>() + std::mem::size_of::<Record>() + 16;
const INDEXED: usize = std::mem::size_of::<(u64, RecordId)>();

/// The bytes a record is counted as.
pub(crate) fn weight(record: &Record) -> usize {
    match &record.state {
        RecordState::InFlight { .. } => BASE + INDEXED,
        RecordState::Completed { outcome, .. } => BASE + INDEXED + outcome.len(),
    }
}

fn in_flight(record: &Record) -> bool {
    matches!(record.state, RecordState::InFlight { .. })
}

fn expiry(record: &Record) -> Option<u64> {
    match record.state {
        RecordState::Completed { expires_at, .. } => Some(expires_at),
        RecordState::InFlight { .. } => None,
    }
}

/// The records of one shard.
#[derive(Default)]
pub(crate) struct Shard {
    records: HashMap<RecordId, Record, IdHashing>,
    /// Completed records as `(expires_at, id)`, one queue per lifetime:
    /// records completed with the same TTL expire in the order they
    /// completed, so each queue is in expiry order and appending is O(1).
    /// An entry whose record has changed since (released, re-completed,
    /// dropped) is skipped when it reaches the front. In-flight claims are
    /// never queued, so they are never evicted.
    queues: Vec<(u64, VecDeque<(u64, RecordId)>)>,
    /// The ids of the records in flight, live or not: where the purge looks
    /// for the claims of holders that crashed, without visiting every
    /// completed record. As many as there are claims, a small set.
    in_flight: HashSet<RecordId, IdHashing>,
    /// Duplicates waiting for an in-flight record to change.
    waiters: HashMap<RecordId, Arc<Notify>, IdHashing>,
}

/// Whether a claim still holds its record, as a transaction's commit asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holding {
    /// The record is in flight under the claim's token, its lease alive.
    Holds,
    /// The claim's token completed the record already.
    Completed,
    /// Anything else: the claim is lost.
    Lost,
}

/// What one pass of [`Shard::purge`] dropped.
pub(crate) struct Purged {
    /// How many records.
    pub(crate) count: usize,
    /// Their bytes.
    pub(crate) bytes: usize,
    /// Whether expired records may be left (the pass stopped at its budget).
    pub(crate) more: bool,
}

/// What applying an event did to the shard's weight and size.
pub(crate) struct Applied {
    /// The answer for the caller, or `None` if a new record did not fit.
    pub(crate) answer: Option<Answer>,
    /// The change in bytes.
    pub(crate) bytes: isize,
    /// The change in records.
    pub(crate) records: isize,
}

fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

/// Queues `id`, completed at `now` to expire `at`, behind the records of
/// the same lifetime.
fn enqueue(queues: &mut Vec<(u64, VecDeque<(u64, RecordId)>)>, now: u64, at: u64, id: RecordId) {
    let ttl = at.saturating_sub(now);
    match queues.iter_mut().find(|(t, _)| *t == ttl) {
        Some((_, queue)) => queue.push_back((at, id)),
        None => queues.push((ttl, VecDeque::from([(at, id)]))),
    }
}

/// Whether a queue entry still names a completed record expiring then.
fn current(records: &HashMap<RecordId, Record, IdHashing>, at: u64, id: &RecordId) -> bool {
    records.get(id).is_some_and(|r| expiry(r) == Some(at))
}

impl Shard {
    /// Drops the entries at the front of each queue that no longer name
    /// their record, and the queues left empty.
    fn trim(&mut self) {
        let records = &self.records;
        for (_, queue) in &mut self.queues {
            while queue
                .front()
                .is_some_and(|(at, id)| !current(records, *at, id))
            {
                queue.pop_front();
            }
        }
        self.queues.retain(|(_, q)| !q.is_empty());
    }

    /// Applies `event` to the record at `id` at time `now`. A new record is
    /// inserted only if `admit(its weight)` says it fits; a change to an
    /// existing record is always applied (a completion must not be refused).
    pub(crate) fn apply(
        &mut self,
        id: &RecordId,
        now: u64,
        event: Event<'_>,
        admit: impl FnOnce(usize) -> bool,
    ) -> Applied {
        // One hash and one probe per event on the common path.
        match self.records.entry(*id) {
            Entry::Occupied(mut found) => {
                let stale = found.get().droppable(now);
                let (answer, effect) = machine::step(Some(found.get()), now, event);
                match effect {
                    Effect::Put(record) => {
                        let (old_weight, new_weight) = (weight(found.get()), weight(&record));
                        let old_expiry = expiry(found.get());
                        let new_expiry = expiry(&record);
                        let settled = !matches!(
                            record.state,
                            RecordState::InFlight { lease_until } if lease_until > now
                        );
                        match (in_flight(found.get()), in_flight(&record)) {
                            (false, true) => {
                                self.in_flight.insert(*id);
                            }
                            (true, false) => {
                                self.in_flight.remove(id);
                            }
                            _ => {}
                        }
                        *found.get_mut() = record;
                        if settled {
                            if let Some(waiting) = self.waiters.remove(id) {
                                waiting.notify_waiters();
                            }
                        }
                        if let Some(at) = new_expiry.filter(|_| old_expiry != new_expiry) {
                            enqueue(&mut self.queues, now, at, *id);
                        }
                        Applied {
                            answer: Some(answer),
                            bytes: signed(new_weight) - signed(old_weight),
                            records: 0,
                        }
                    }
                    Effect::Keep if stale => {
                        let gone = found.remove();
                        if in_flight(&gone) {
                            self.in_flight.remove(id);
                        }
                        Applied {
                            answer: Some(answer),
                            bytes: -signed(weight(&gone)),
                            records: -1,
                        }
                    }
                    Effect::Keep => Applied {
                        answer: Some(answer),
                        bytes: 0,
                        records: 0,
                    },
                }
            }
            Entry::Vacant(slot) => {
                let (answer, effect) = machine::step(None, now, event);
                let Effect::Put(record) = effect else {
                    return Applied {
                        answer: Some(answer),
                        bytes: 0,
                        records: 0,
                    };
                };
                let w = weight(&record);
                if !admit(w) {
                    return Applied {
                        answer: None,
                        bytes: 0,
                        records: 0,
                    };
                }
                let at = expiry(&record);
                if in_flight(&record) {
                    self.in_flight.insert(*id);
                }
                slot.insert(record);
                if let Some(at) = at {
                    enqueue(&mut self.queues, now, at, *id);
                }
                Applied {
                    answer: Some(answer),
                    bytes: 0, // counted by `admit`
                    records: 1,
                }
            }
        }
    }

    /// Whether the claim with `token` still holds the record `id` at `now`.
    pub(crate) fn holding(&self, id: &RecordId, now: u64, token: crate::FencingToken) -> Holding {
        match self.records.get(id) {
            Some(r) if r.token == token && r.is_live(now) => match r.state {
                RecordState::InFlight { .. } => Holding::Holds,
                RecordState::Completed { .. } => Holding::Completed,
            },
            _ => Holding::Lost,
        }
    }

    /// Drops records that are no longer live at `now`, looking at no more
    /// than `budget` queue entries or crashed claims (at least one), and
    /// says whether it stopped at the budget.
    ///
    /// It looks only where expired records can be: the claims in flight (as
    /// many as there are claims) and the front of each expiry queue, which
    /// holds the completed records in the order they expire. So a pass costs
    /// what it drops, not what the shard holds, and the caller can let the
    /// lock go between budgets.
    pub(crate) fn purge(&mut self, now: u64, budget: usize) -> Purged {
        let budget = budget.max(1);
        let mut gone = Purged {
            count: 0,
            bytes: 0,
            more: false,
        };
        // Claims whose holders crashed or stalled past their leases.
        let records = &self.records;
        let crashed: Vec<RecordId> = self
            .in_flight
            .iter()
            .filter(|id| records.get(*id).is_none_or(|r| r.droppable(now)))
            .take(budget)
            .copied()
            .collect();
        for id in &crashed {
            self.in_flight.remove(id);
            if let Some(record) = self.records.remove(id) {
                gone.count += 1;
                gone.bytes += weight(&record);
            }
        }
        // Completed records, in expiry order per lifetime. Entries that no
        // longer name their record count against the budget too.
        // At the budget, some may be left.
        gone.more = crashed.len() == budget;
        let mut looked = crashed.len();
        for (_, queue) in &mut self.queues {
            while let Some(&(at, id)) = queue.front() {
                if looked >= budget {
                    gone.more = true;
                    break;
                }
                looked += 1;
                let Entry::Occupied(found) = self.records.entry(id) else {
                    queue.pop_front();
                    continue;
                };
                if expiry(found.get()) != Some(at) {
                    // Changed since it was queued: not this entry's record.
                    queue.pop_front();
                    continue;
                }
                if !found.get().droppable(now) {
                    break;
                }
                queue.pop_front();
                gone.count += 1;
                gone.bytes += weight(&found.remove());
            }
        }
        self.trim();
        let records = &self.records;
        self.waiters
            .retain(|id, _| records.get(id).is_some_and(|r| r.is_live(now)));
        gone
    }

    /// What to wait on for the record `id` to change, if it is in flight at
    /// `now` (else it has changed already: `None`).
    pub(crate) fn watch(&mut self, id: &RecordId, now: u64) -> Option<Arc<Notify>> {
        let in_flight = self.records.get(id).is_some_and(
            |r| matches!(r.state, RecordState::InFlight { lease_until } if lease_until > now),
        );
        in_flight.then(|| Arc::clone(self.waiters.entry(*id).or_default()))
    }

    /// The record `id`, as stored.
    pub(crate) fn get(&self, id: &RecordId) -> Option<Record> {
        self.records.get(id).cloned()
    }

    /// The completed record closest to expiry, if any.
    pub(crate) fn oldest(&mut self) -> Option<(u64, RecordId)> {
        self.trim();
        self.queues
            .iter()
            .filter_map(|(_, q)| q.front().copied())
            .min()
    }

    /// Evicts the completed record `id` if it still expires at `at`; returns
    /// its bytes.
    pub(crate) fn evict(&mut self, at: u64, id: &RecordId) -> Option<usize> {
        if !current(&self.records, at, id) {
            return None;
        }
        let gone = self.records.remove(id)?;
        self.trim();
        Some(weight(&gone))
    }
}
