//! The in-memory store: for one process, for tests, and as the embedded default.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::fingerprint::Fingerprint;
use crate::key::RecordId;
use crate::machine::{Answer, Event, RecordState};
use crate::store::{
    Begin, Lease, Outcome, RecordInfo, RecordInfoState, Removal, Store, StoreError,
};
use crate::store_future::StoreFuture;

mod id_hashing;
mod shard;
mod transaction;

use shard::{Holding, Shard};
pub use transaction::MemoryTransaction;
use transaction::{run_effects, Staged};

mod bound;
mod builder;
mod clock;
pub use builder::{MemoryStoreBuilder, WhenFull};
pub use clock::{Clock, ManualClock, SystemClock};

/// The most crashed claims and expiry-queue entries one hold of a shard's
/// lock looks at while purging (some tens of microseconds), so that a purge
/// delays no request for longer.
const PURGE_BATCH: usize = 1024;

struct Inner {
    shards: Box<[Mutex<Shard>]>,
    len: AtomicUsize,
    bytes: AtomicUsize,
    evictions: AtomicU64,
    /// When a full store last scanned for expired records (clock micros), so
    /// that a store kept full does not rescan on every refused request.
    last_full_purge: AtomicU64,
    max_bytes: usize,
    when_full: WhenFull,
    /// How long a completed record is traced once expired.
    trace: Duration,
    clock: Box<dyn Clock>,
}

/// A sharded, expiring, bounded store in this process's memory.
///
/// - **Sharded**: records are spread over independently locked maps, so
///   unrelated keys do not contend.
/// - **Expiring**: a record that is no longer live is dropped when it is next
///   touched, and by a periodic purge ([`MemoryStoreBuilder::purge_interval`])
///   that costs what expired, not what the store holds, and holds a shard's
///   lock for at most 1 024 records at a time.
/// - **Bounded in bytes** ([`max_bytes`](MemoryStoreBuilder::max_bytes),
///   default 256 MiB), counting each record's outcome (a recorded response)
///   and an estimate of its overhead. At the bound it evicts completed
///   records closest to expiry (those already expired, kept as traces,
///   first), never an in-flight claim, counting
///   ([`evictions`](MemoryStore::evictions)) and warning of each record it
///   evicts before its lifetime ends; or, with [`WhenFull::Refuse`],
///   refuses new records until some expire. A completion is never refused:
///   it may take the store over its bound until the next eviction.
/// - **Traced**: a completed record is kept a day past its lifetime
///   ([`expired_trace`](MemoryStoreBuilder::expired_trace)), so that a late
///   retry is refused ([`Begin::Expired`]) rather than run again.
///
/// The default's trade-off: 256 MiB holds about 950 000 records of a small
/// JSON response (about 290 bytes each by the store's count, 410 resident,
/// measured by `cargo bench -p idem-tests --bench capacity`), about sixteen
/// minutes of records at 1 000 new requests a second; a retry of a record evicted before its lifetime
/// ends runs again. Size `max_bytes` to the rate times the lifetime, or
/// choose [`WhenFull::Refuse`] (new work waits, no retry runs twice).
///
/// Records do not survive a restart and are not shared between processes; use
/// `idem-redis` or `idem-postgres` for that.
///
/// ```
/// # async fn demo() {
/// use idem_core::{Engine, MemoryStore};
/// let engine = Engine::new(MemoryStore::new());
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("len", &self.len())
            .field("bytes", &self.bytes())
            .field("max_bytes", &self.inner.max_bytes)
            .field("when_full", &self.inner.when_full)
            .field("evictions", &self.evictions())
            .finish()
    }
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic while holding a shard lock cannot leave a record half-written
    // (every write is one insert, overwrite or remove, with its index entry
    // and weight), so a poisoned lock is still sound.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

fn add(counter: &AtomicUsize, delta: isize) {
    // Most events change neither count: no write to a line every thread shares.
    if delta == 0 {
        return;
    }
    if delta > 0 {
        counter.fetch_add(delta.unsigned_abs(), Ordering::SeqCst);
    } else {
        counter.fetch_sub(delta.unsigned_abs(), Ordering::SeqCst);
    }
}

impl Inner {
    fn shard(&self, id: &RecordId) -> &Mutex<Shard> {
        let b = id.as_bytes();
        let h = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        // The id is a SHA-256 digest, so its first bytes are uniform.
        let i = usize::try_from(h % self.shards.len() as u64).unwrap_or(0);
        &self.shards[i]
    }

    fn purge_expired(&self) -> usize {
        self.purge_batches(self.clock.now_micros()).sum()
    }

    /// The purge at `now`, one bounded hold of a shard's lock per item (what
    /// it dropped): summed at once, or with other work between the holds.
    fn purge_batches(&self, now: u64) -> impl Iterator<Item = usize> + '_ {
        let mut shard = 0;
        std::iter::from_fn(move || {
            if shard == self.shards.len() {
                return None;
            }
            let (count, more) = self.purge_batch(shard, now);
            if !more {
                shard += 1;
            }
            Some(count)
        })
    }

    /// Drops up to [`PURGE_BATCH`] records of `shard` that are no longer
    /// live at `now`, under one hold of its lock; how many, and whether
    /// more may be left.
    fn purge_batch(&self, shard: usize, now: u64) -> (usize, bool) {
        let gone = lock(&self.shards[shard]).purge(now, PURGE_BATCH);
        self.bytes.fetch_sub(gone.bytes, Ordering::SeqCst);
        self.len.fetch_sub(gone.count, Ordering::SeqCst);
        (gone.count, gone.more)
    }

    /// Applies one event atomically under the record's shard lock. Returns
    /// `None` when a new record must be inserted but does not fit.
    fn apply(&self, id: &RecordId, event: Event<'_>) -> Option<Answer> {
        let now = self.clock.now_micros();
        let applied = lock(self.shard(id)).apply(id, now, event, |weight| self.reserve(weight));
        add(&self.bytes, applied.bytes);
        add(&self.len, applied.records);
        applied.answer
    }

    /// Counts `weight` more bytes if they fit under the bound.
    fn reserve(&self, weight: usize) -> bool {
        self.bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n.saturating_add(weight) <= self.max_bytes).then_some(n + weight)
            })
            .is_ok()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store with the default settings (see [`MemoryStoreBuilder`]): at
    /// most 256 MiB of records, the closest to expiry evicted past that
    /// (each one evicted before its lifetime ends counted and warned of),
    /// expired records traced a day.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Configures a store.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            max_bytes: 256 << 20,
            when_full: WhenFull::EvictOldest,
            trace: Duration::from_hours(24),
            shards: 64,
            purge_interval: Some(Duration::from_secs(30)),
            clock: Box::new(SystemClock),
        }
    }

    /// How many records are held, expired ones not yet purged included.
    pub fn len(&self) -> usize {
        self.inner.len.load(Ordering::SeqCst)
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the records are counted as (see
    /// [`MemoryStoreBuilder::max_bytes`]).
    pub fn bytes(&self) -> usize {
        self.inner.bytes.load(Ordering::SeqCst)
    }

    /// How many completed records were evicted at the bound before their
    /// lifetime ended, since the store was built: each a record whose retry
    /// would have been answered and now runs again. Each eviction is also
    /// logged as a warning (the decision `evicted`). Traces of records
    /// already expired, evicted first, are not counted.
    pub fn evictions(&self) -> u64 {
        self.inner.evictions.load(Ordering::SeqCst)
    }

    /// Drops every record that is no longer live (nor traced); returns how
    /// many.
    pub fn purge_expired(&self) -> usize {
        self.inner.purge_expired()
    }

    /// A transaction for effects kept in this process (a balance in a
    /// map), committed by [`Claim::commit`](crate::Claim::commit) together
    /// with the record, only while the claim holds.
    pub fn transaction(&self) -> MemoryTransaction {
        MemoryTransaction::new(self.clone())
    }

    /// Commits a transaction: under the record's shard lock, checks that
    /// the claim holds, runs the effects, and completes the record, in one
    /// step that no begin, renewal or removal of the record can come
    /// between.
    fn commit(&self, staged: Staged) -> Result<(), StoreError> {
        let Staged {
            effects,
            completion,
        } = staged;
        let Some(completion) = completion else {
            // Effects without a record (outside idem).
            return run_effects(effects);
        };
        let now = self.inner.clock.now_micros();
        let mut shard = lock(self.inner.shard(&completion.id));
        match shard.holding(&completion.id, now, completion.lease.token) {
            Holding::Holds => {}
            // Committed before (an uncertain commit retried): applied once.
            Holding::Completed => return Ok(()),
            Holding::Lost => return Err(StoreError::lease_lost()),
        }
        run_effects(effects)?;
        let event = Event::Complete {
            lease: &completion.lease,
            outcome: &completion.outcome,
            ttl: completion.ttl,
            trace: self.inner.trace,
        };
        let applied = shard.apply(&completion.id, now, event, |_| true);
        drop(shard);
        add(&self.inner.bytes, applied.bytes);
        add(&self.inner.len, applied.records);
        if self.inner.when_full == WhenFull::EvictOldest
            && self.inner.bytes.load(Ordering::SeqCst) > self.inner.max_bytes
        {
            self.inner.make_room();
        }
        match applied.answer {
            Some(Answer::Completed) => Ok(()),
            Some(other) => Err(unexpected(&other)),
            None => Err(StoreError::corrupt(
                "memory store: the completion was not applied",
            )),
        }
    }

    fn run(&self, id: &RecordId, event: Event<'_>) -> Result<Answer, StoreError> {
        let answer = if let Some(answer) = self.inner.apply(id, event) {
            answer
        } else {
            self.inner.make_room();
            self.inner
                .apply(id, event)
                .ok_or_else(|| StoreError::full(self.inner.max_bytes))?
        };
        // A completion may take the store over its bound: bring it back.
        if self.inner.when_full == WhenFull::EvictOldest
            && self.inner.bytes.load(Ordering::SeqCst) > self.inner.max_bytes
        {
            self.inner.make_room();
        }
        Ok(answer)
    }
}

fn unexpected(answer: &Answer) -> StoreError {
    StoreError::corrupt(format!(
        "memory store: unexpected transition answer {answer:?}"
    ))
}

fn fenced(answer: Answer) -> Result<(), StoreError> {
    match answer {
        Answer::Completed | Answer::Released => Ok(()),
        Answer::LeaseLost => Err(StoreError::lease_lost()),
        other => Err(unexpected(&other)),
    }
}

#[async_trait]
impl Store for MemoryStore {
    // The memory store never waits: its answers are ready, and cost no
    // allocation on the engine's path.
    fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin> {
        StoreFuture::ready(match self.run(id, Event::Begin { fingerprint, lease }) {
            Ok(Answer::Begin(b)) => Ok(b),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Err(e),
        })
    }

    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        let trace = self.inner.trace;
        let event = Event::Complete {
            lease,
            outcome,
            ttl,
            trace,
        };
        StoreFuture::ready(self.run(id, event).and_then(fenced))
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        fenced(self.run(id, Event::Release { lease })?)
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        match self.run(id, Event::Renew { lease, duration })? {
            Answer::Renewed(l) => Ok(l),
            Answer::LeaseLost => Err(StoreError::lease_lost()),
            other => Err(unexpected(&other)),
        }
    }

    fn name(&self) -> &'static str {
        "memory"
    }

    fn wakes(&self) -> bool {
        true
    }

    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        let now = self.inner.clock.now_micros();
        // Registered under the shard's lock: a change made after `watch`
        // looked cannot be missed.
        let notified = {
            let mut shard = lock(self.inner.shard(id));
            let notify = shard.watch(id, now)?;
            let mut notified = Box::pin(notify.notified_owned());
            notified.as_mut().enable();
            notified
        };
        let _ = tokio::time::timeout(within, notified).await;
        None
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        let now = self.inner.clock.now_micros();
        let left = |until: u64| Duration::from_micros(until.saturating_sub(now));
        let record = lock(self.inner.shard(id)).get(id);
        Ok(record.filter(|r| r.is_live(now)).map(|r| RecordInfo {
            fingerprint: r.fingerprint,
            token: r.token,
            state: match r.state {
                RecordState::InFlight { lease_until } => RecordInfoState::InFlight {
                    lease_left: left(lease_until),
                },
                RecordState::Completed {
                    outcome,
                    expires_at,
                    ..
                } => RecordInfoState::Completed {
                    expires_in: left(expires_at),
                    outcome,
                },
            },
        }))
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        match self.run(id, Event::Remove { force })? {
            Answer::Removed => Ok(Removal::Removed),
            Answer::RemoveRefused => Ok(Removal::RefusedInFlight),
            Answer::Absent => Ok(Removal::Absent),
            other => Err(unexpected(&other)),
        }
    }
}
