//! Building a [`MemoryStore`]: its bound, what it does at the bound, its
//! shards, its purge and its clock.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::clock::Clock;
use super::shard::Shard;
use super::{Inner, MemoryStore};

/// What a [`MemoryStore`] at its byte bound does when a new record comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WhenFull {
    /// Evict completed records, those closest to expiry first, until the
    /// store is a little under its bound (the default). An in-flight claim is
    /// never evicted; if nothing but claims is left, the new record is
    /// refused. The trade-off: a retry that comes after its record was
    /// evicted runs again. The records evicted first are the oldest, the
    /// least likely to be retried; size the bound so that they are older
    /// than any retry you expect.
    #[default]
    EvictOldest,
    /// Refuse new records ([`Full`](crate::StoreErrorKind::Full), 503 over
    /// HTTP) until records expire: no retry ever runs twice, and new work
    /// waits.
    Refuse,
}

/// Configures a [`MemoryStore`].
pub struct MemoryStoreBuilder {
    pub(super) max_bytes: usize,
    pub(super) when_full: WhenFull,
    pub(super) trace: Duration,
    pub(super) shards: usize,
    pub(super) purge_interval: Option<Duration>,
    pub(super) clock: Box<dyn Clock>,
}

impl fmt::Debug for MemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStoreBuilder")
            .field("max_bytes", &self.max_bytes)
            .field("when_full", &self.when_full)
            .field("expired_trace", &self.trace)
            .field("shards", &self.shards)
            .field("purge_interval", &self.purge_interval)
            .finish_non_exhaustive()
    }
}

impl MemoryStoreBuilder {
    /// The most bytes the records may hold (default 256 MiB): their outcomes
    /// plus about 180 bytes of bookkeeping each.
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// What happens to a new record at the bound (default
    /// [`WhenFull::EvictOldest`]).
    #[must_use]
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// How long after a completed record expires a retry of it is still
    /// refused ([`Begin::Expired`](crate::store::Begin::Expired)) rather than run
    /// again (default 24 hours; `Duration::ZERO` turns it off). The memory
    /// store keeps the whole record for that time, not live, and evicts such
    /// records first at its bound, before any live one.
    #[must_use]
    pub fn expired_trace(mut self, trace: Duration) -> Self {
        self.trace = trace;
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
            .map(|_| Mutex::new(Shard::default()))
            .collect();
        let store = MemoryStore {
            inner: Arc::new(Inner {
                shards,
                len: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
                evictions: AtomicU64::new(0),
                last_full_purge: AtomicU64::new(0),
                max_bytes: self.max_bytes,
                when_full: self.when_full,
                trace: self.trace,
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
        let mut purged = 0;
        for count in inner.purge_batches(inner.clock.now_micros()) {
            purged += count;
            // The worker's other tasks run between batches.
            tokio::task::yield_now().await;
        }
        if purged > 0 {
            tracing::debug!(target: "idem", purged, "memory store purged expired records");
        }
    }
}
