//! The in-memory store: for one process, for tests, and as the embedded default.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::fingerprint::Fingerprint;
use crate::key::RecordId;
use crate::machine::{self, micros, Answer, Effect, Event, Record};
use crate::store::{Begin, Lease, Outcome, Store, StoreError};

/// A source of time for [`MemoryStore`], in microseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now_micros(&self) -> u64;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, micros)
    }
}

/// A clock that moves only when told to, for deterministic tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `start_micros`.
    pub fn new(start_micros: u64) -> Self {
        Self(AtomicU64::new(start_micros))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(micros(by), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock> Clock for Arc<C> {
    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }
}

type Shard = Mutex<HashMap<RecordId, Record>>;

struct Inner {
    shards: Box<[Shard]>,
    len: AtomicUsize,
    /// When a full store last scanned for expired records (clock micros), so
    /// that a store kept full does not rescan on every refused request.
    last_full_purge: AtomicU64,
    capacity: usize,
    clock: Box<dyn Clock>,
}

/// A sharded, expiring, bounded store in this process's memory.
///
/// - **Sharded**: records are spread over independently locked maps, so
///   unrelated keys do not contend.
/// - **Expiring**: a record that is no longer live is dropped when it is next
///   touched, and by a periodic purge ([`MemoryStoreBuilder::purge_interval`]).
/// - **Bounded**: at [`capacity`](MemoryStoreBuilder::capacity) live records,
///   new claims fail with a [`Full`](crate::StoreErrorKind::Full) error. No live
///   record is ever evicted to make room: evicting a completed record would let
///   its retry run twice, and evicting an in-flight one would let a duplicate run
///   beside it.
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
            .field("capacity", &self.inner.capacity)
            .finish()
    }
}

/// Configures a [`MemoryStore`].
pub struct MemoryStoreBuilder {
    capacity: usize,
    shards: usize,
    purge_interval: Option<Duration>,
    clock: Box<dyn Clock>,
}

impl fmt::Debug for MemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStoreBuilder")
            .field("capacity", &self.capacity)
            .field("shards", &self.shards)
            .field("purge_interval", &self.purge_interval)
            .finish_non_exhaustive()
    }
}

impl MemoryStoreBuilder {
    /// The most live records held at once (default 1,000,000).
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// How many independently locked shards (default 64, at least 1).
    #[must_use]
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.max(1);
        self
    }

    /// How often a background task drops expired records (default 30s); `None`
    /// turns the task off (expired records are then dropped only when touched,
    /// or by [`MemoryStore::purge_expired`]). The task starts only when the store
    /// is built inside a tokio runtime, and ends when the store is dropped.
    #[must_use]
    pub fn purge_interval(mut self, every: Option<Duration>) -> Self {
        self.purge_interval = every;
        self
    }

    /// The clock deciding expiry (default the system clock).
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// Builds the store.
    pub fn build(self) -> MemoryStore {
        let shards = (0..self.shards)
            .map(|_| Mutex::new(HashMap::new()))
            .collect();
        let store = MemoryStore {
            inner: Arc::new(Inner {
                shards,
                len: AtomicUsize::new(0),
                last_full_purge: AtomicU64::new(0),
                capacity: self.capacity,
                clock: self.clock,
            }),
        };
        if let (Some(every), Ok(handle)) =
            (self.purge_interval, tokio::runtime::Handle::try_current())
        {
            handle.spawn(purge_loop(Arc::downgrade(&store.inner), every));
        }
        store
    }
}

async fn purge_loop(inner: Weak<Inner>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let purged = inner.purge_expired();
        if purged > 0 {
            tracing::debug!(target: "idem", purged, "memory store purged expired records");
        }
    }
}

fn lock(shard: &Shard) -> MutexGuard<'_, HashMap<RecordId, Record>> {
    // A panic while holding a shard lock cannot leave a record half-written
    // (every write is one insert or remove), so a poisoned lock is still sound.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn shard(&self, id: &RecordId) -> &Shard {
        let b = id.as_bytes();
        let h = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        // The id is a SHA-256 digest, so its first bytes are uniform.
        let i = usize::try_from(h % self.shards.len() as u64).unwrap_or(0);
        &self.shards[i]
    }

    fn purge_expired(&self) -> usize {
        let now = self.clock.now_micros();
        let mut purged = 0;
        for shard in &*self.shards {
            let mut map = lock(shard);
            let before = map.len();
            map.retain(|_, r| !r.droppable(now));
            purged += before - map.len();
        }
        self.len.fetch_sub(purged, Ordering::SeqCst);
        purged
    }

    /// Applies one event atomically under the record's shard lock. Returns
    /// `None` when a new record must be inserted but the store is full.
    fn apply(&self, id: &RecordId, event: Event<'_>) -> Option<Answer> {
        let now = self.clock.now_micros();
        let mut map = lock(self.shard(id));
        // One hash and one probe per event: the entry is read, then
        // overwritten or removed in place.
        match map.entry(*id) {
            Entry::Occupied(mut found) => {
                let stale = found.get().droppable(now);
                let (answer, effect) = machine::step(Some(found.get()), now, event);
                match effect {
                    Effect::Put(record) => *found.get_mut() = record,
                    Effect::Keep if stale => {
                        found.remove();
                        self.len.fetch_sub(1, Ordering::SeqCst);
                    }
                    Effect::Keep => {}
                }
                Some(answer)
            }
            Entry::Vacant(slot) => {
                let (answer, effect) = machine::step(None, now, event);
                if let Effect::Put(record) = effect {
                    if !self.reserve() {
                        return None;
                    }
                    slot.insert(record);
                }
                Some(answer)
            }
        }
    }

    fn reserve(&self) -> bool {
        self.len
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.capacity).then_some(n + 1)
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
    /// A store with the default settings (see [`MemoryStoreBuilder`]).
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Configures a store.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            capacity: 1_000_000,
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

    /// Drops every record that is no longer live; returns how many.
    pub fn purge_expired(&self) -> usize {
        self.inner.purge_expired()
    }

    fn run(&self, id: &RecordId, event: Event<'_>) -> Result<Answer, StoreError> {
        if let Some(answer) = self.inner.apply(id, event) {
            return Ok(answer);
        }
        // Full: make room from expired records anywhere, then try once more;
        // at most one such scan per 100ms.
        let now = self.inner.clock.now_micros();
        let last = self.inner.last_full_purge.load(Ordering::SeqCst);
        if now.saturating_sub(last) >= 100_000
            && self
                .inner
                .last_full_purge
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.inner.purge_expired();
            if let Some(answer) = self.inner.apply(id, event) {
                return Ok(answer);
            }
        }
        Err(StoreError::full(self.inner.capacity))
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
    async fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        match self.run(id, Event::Begin { fingerprint, lease })? {
            Answer::Begin(b) => Ok(b),
            other => Err(unexpected(&other)),
        }
    }

    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        fenced(self.run(
            id,
            Event::Complete {
                lease,
                outcome,
                ttl,
            },
        )?)
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
}
