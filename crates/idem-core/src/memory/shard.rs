//! One shard of the memory store: its records, the completed ones ordered by
//! expiry (what eviction takes first), and what they weigh.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};

use crate::key::RecordId;
use crate::machine::{self, Answer, Effect, Event, Record, RecordState};

/// What one record weighs beyond its outcome's bytes: its address, the
/// record itself and its slot in the map, plus its entry in the expiry index
/// once completed. An estimate of the heap it holds, not a measurement.
const BASE: usize = std::mem::size_of::<RecordId>() + std::mem::size_of::<Record>() + 16;
const INDEXED: usize = std::mem::size_of::<(u64, RecordId)>() + 16;

/// The bytes a record is counted as.
pub(crate) fn weight(record: &Record) -> usize {
    match &record.state {
        RecordState::InFlight { .. } => BASE,
        RecordState::Completed { outcome, .. } => BASE + INDEXED + outcome.len(),
    }
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
    records: HashMap<RecordId, Record>,
    /// Completed records by `(expires_at, id)`: the first is the one closest
    /// to expiry. In-flight claims are not in it, so they are never evicted.
    by_expiry: BTreeSet<(u64, RecordId)>,
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

impl Shard {
    fn unindex(&mut self, id: &RecordId, record: &Record) {
        if let Some(at) = expiry(record) {
            self.by_expiry.remove(&(at, *id));
        }
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
                        *found.get_mut() = record;
                        if old_expiry != new_expiry {
                            if let Some(at) = old_expiry {
                                self.by_expiry.remove(&(at, *id));
                            }
                            if let Some(at) = new_expiry {
                                self.by_expiry.insert((at, *id));
                            }
                        }
                        Applied {
                            answer: Some(answer),
                            bytes: signed(new_weight) - signed(old_weight),
                            records: 0,
                        }
                    }
                    Effect::Keep if stale => {
                        let gone = found.remove();
                        self.unindex(id, &gone);
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
                slot.insert(record);
                if let Some(at) = at {
                    self.by_expiry.insert((at, *id));
                }
                Applied {
                    answer: Some(answer),
                    bytes: 0, // counted by `admit`
                    records: 1,
                }
            }
        }
    }

    /// Drops every record that is no longer live at `now`; returns how many
    /// and their bytes.
    pub(crate) fn purge(&mut self, now: u64) -> (usize, usize) {
        let (mut count, mut bytes) = (0, 0);
        let by_expiry = &mut self.by_expiry;
        self.records.retain(|id, r| {
            if r.droppable(now) {
                count += 1;
                bytes += weight(r);
                if let Some(at) = expiry(r) {
                    by_expiry.remove(&(at, *id));
                }
                false
            } else {
                true
            }
        });
        (count, bytes)
    }

    /// The completed record closest to expiry, if any.
    pub(crate) fn oldest(&self) -> Option<(u64, RecordId)> {
        self.by_expiry.first().copied()
    }

    /// Evicts the completed record `id` if it still expires at `at`; returns
    /// its bytes.
    pub(crate) fn evict(&mut self, at: u64, id: &RecordId) -> Option<usize> {
        if !self.by_expiry.remove(&(at, *id)) {
            return None;
        }
        let gone = self.records.remove(id)?;
        Some(weight(&gone))
    }
}
