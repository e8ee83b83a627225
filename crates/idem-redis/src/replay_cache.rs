//! Replays answered in process ([`RedisStore::with_replay_cache`]): a
//! bounded cache of completed records, so that a retry of a finished
//! operation costs no round trip to Redis.
//!
//! A completed record never changes: it only expires (its TTL) or is
//! removed. The cache keeps each entry no longer than the record lives, and
//! forgets an entry when the store's wake channel says its record changed,
//! which it does from the same script that removes it. So the cache is used
//! only while that channel is subscribed: losing the subscription (a
//! dropped connection, a failover) empties it, and it fills again once
//! subscribed. What remains is the time a removal's message takes to
//! arrive, a few milliseconds, during which this instance may still replay
//! a record another instance just removed; and, if the subscription dies
//! without its connection closing, at most `max_age`.
//!
//! A reply read from Redis is kept only if no change to its record was
//! published since the call was sent ([`Ticket`]): a removal that happens
//! after the script read the record, and whose message arrives before the
//! reply is handled, must not leave the removed outcome behind.
//!
//! With the crate's `metrics` feature, the counter `idem.replay_cache`
//! counts, by `idem.event`, the retries answered from the cache (`hit`: a
//! replay, or a mismatch), the replays Redis answered while the cache was on (`miss`), and each time the
//! cache was emptied because the subscription was lost (`emptied`); the
//! gauge `idem.replay_cache.bytes` is the weight it holds.
//!
//! [`RedisStore::with_replay_cache`]: crate::RedisStore::with_replay_cache

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idem_core::store::Begin;
use idem_core::{Fingerprint, Outcome, RecordId};
use quick_cache::sync::Cache;
use quick_cache::Weighter;

/// How many change counters the records' ids are spread over.
const COUNTERS: usize = 1024;

/// What an entry is assumed to cost beside its outcome: the id, the
/// fingerprint, the deadline and the cache's own bookkeeping.
const ENTRY_OVERHEAD: u64 = 128;

/// The completed records one store has replayed lately.
pub(crate) struct ReplayCache {
    entries: Cache<RecordId, Entry, ByBytes>,
    max_bytes: u64,
    max_age: Duration,
    /// Whether the wake channel is subscribed: only then are removals seen.
    live: AtomicBool,
    /// Moved on at every subscription and every loss of it.
    generation: AtomicU64,
    /// Moved on by every change published for a record whose id falls here.
    changes: Box<[AtomicU64]>,
}

#[derive(Clone)]
struct Entry {
    fingerprint: Fingerprint,
    outcome: Outcome,
    expires: Instant,
}

#[derive(Clone)]
struct ByBytes;

impl Weighter<RecordId, Entry> for ByBytes {
    fn weight(&self, _: &RecordId, entry: &Entry) -> u64 {
        entry.outcome.as_bytes().len() as u64 + ENTRY_OVERHEAD
    }
}

/// Where the cache stood when a call to Redis was sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    generation: u64,
    changes: u64,
}

impl ReplayCache {
    /// An empty cache of at most `max_bytes` of outcomes, each kept at most
    /// `max_age`.
    pub(crate) fn new(max_bytes: u64, max_age: Duration) -> Self {
        let estimated_items = usize::try_from(max_bytes / 1024)
            .unwrap_or(usize::MAX)
            .max(16);
        Self {
            entries: Cache::with_weighter(estimated_items, max_bytes.max(1), ByBytes),
            max_bytes,
            max_age,
            live: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            changes: (0..COUNTERS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// An empty cache with the same bounds (for a store with another prefix).
    pub(crate) fn fresh(&self) -> Self {
        Self::new(self.max_bytes, self.max_age)
    }

    /// The answer to a `begin` of `id` with `fingerprint`, if the cache
    /// holds its completed record: its replay, or a mismatch.
    pub(crate) fn answer(&self, id: &RecordId, fingerprint: &Fingerprint) -> Option<Begin> {
        let entry = self.entries.get(id)?;
        if entry.expires <= Instant::now() {
            self.entries.remove(id);
            return None;
        }
        count("hit");
        Some(if entry.fingerprint == *fingerprint {
            Begin::Replay(entry.outcome)
        } else {
            Begin::Mismatch
        })
    }

    /// Taken before a call that may read `id`'s completed record; `None`
    /// while the wake channel is not subscribed (nothing is kept then).
    pub(crate) fn ticket(&self, id: &RecordId) -> Option<Ticket> {
        if !self.live.load(Ordering::SeqCst) {
            return None;
        }
        Some(Ticket {
            generation: self.generation.load(Ordering::SeqCst),
            changes: self.counter(id).load(Ordering::SeqCst),
        })
    }

    /// Keeps `id`'s completed record, read by a call sent when `ticket` was
    /// taken and whose key lives at least until `expires`, unless a change
    /// to it was published since.
    pub(crate) fn fill(
        &self,
        id: &RecordId,
        ticket: Ticket,
        fingerprint: &Fingerprint,
        outcome: &Outcome,
        expires: Instant,
    ) {
        count("miss");
        let expires = expires.min(Instant::now() + self.max_age);
        let entry = Entry {
            fingerprint: *fingerprint,
            outcome: outcome.clone(),
            expires,
        };
        // Inserted first, checked after: a change published in between
        // either shows here or removes the entry after this insert
        // (`changed` counts first, then removes).
        self.entries.insert(*id, entry);
        if !self.still(id, ticket) {
            self.entries.remove(id);
        }
        report_size(self.entries.weight());
    }

    /// A change to `id`'s record was published (or made here): forget it.
    pub(crate) fn changed(&self, id: &RecordId) {
        self.counter(id).fetch_add(1, Ordering::SeqCst);
        self.entries.remove(id);
    }

    /// The wake channel is subscribed: changes are seen from now on.
    pub(crate) fn subscribed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.clear();
        self.live.store(true, Ordering::SeqCst);
    }

    /// The wake channel's subscription is lost: changes go unseen, so
    /// nothing may be kept or answered.
    pub(crate) fn unsubscribed(&self) {
        self.live.store(false, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.clear();
        count("emptied");
        report_size(self.entries.weight());
    }

    fn still(&self, id: &RecordId, ticket: Ticket) -> bool {
        self.live.load(Ordering::SeqCst)
            && self.generation.load(Ordering::SeqCst) == ticket.generation
            && self.counter(id).load(Ordering::SeqCst) == ticket.changes
    }

    fn counter(&self, id: &RecordId) -> &AtomicU64 {
        // Ids are SHA-256 digests: any of their bytes are evenly spread.
        let b = id.as_bytes();
        let n = usize::from(u16::from_le_bytes([b[30], b[31]]));
        &self.changes[n % COUNTERS]
    }
}

/// Counts one `idem.replay_cache` event (with the `metrics` feature).
fn count(event: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("idem.replay_cache", "idem.event" => event).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = event;
}

/// Sets the `idem.replay_cache.bytes` gauge (with the `metrics` feature).
fn report_size(bytes: u64) {
    // A gauge is an f64: exact up to 2^53 bytes.
    #[cfg(feature = "metrics")]
    #[allow(clippy::cast_precision_loss)]
    metrics::gauge!("idem.replay_cache.bytes").set(bytes as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> RecordId {
        RecordId::from_bytes([n; 32])
    }

    fn fp(n: u8) -> Fingerprint {
        Fingerprint::from_bytes([n; 32])
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_mins(1)
    }

    fn live() -> ReplayCache {
        let cache = ReplayCache::new(1 << 20, Duration::from_mins(1));
        cache.subscribed();
        cache
    }

    /// Keeps record `n` (fingerprint `n`) as a reply read from Redis with
    /// nothing published about it since.
    fn keep(cache: &ReplayCache, n: u8, outcome: &Outcome, expires: Instant) {
        let ticket = cache.ticket(&id(n)).expect("subscribed");
        cache.fill(&id(n), ticket, &fp(n), outcome, expires);
    }

    /// Fills record 1 with a reply read when `ticket` was taken.
    fn fill_paid(cache: &ReplayCache, ticket: Ticket) {
        cache.fill(
            &id(1),
            ticket,
            &fp(1),
            &Outcome::new(b"paid".to_vec()),
            later(),
        );
    }

    fn replayed(answer: Option<Begin>) -> Option<Vec<u8>> {
        match answer {
            Some(Begin::Replay(outcome)) => Some(outcome.as_bytes().to_vec()),
            _ => None,
        }
    }

    #[test]
    fn a_kept_record_answers_its_replay_and_a_mismatch_for_another_input() {
        let cache = live();
        keep(&cache, 1, &Outcome::new(b"paid".to_vec()), later());
        assert_eq!(
            replayed(cache.answer(&id(1), &fp(1))).as_deref(),
            Some(&b"paid"[..])
        );
        assert!(matches!(
            cache.answer(&id(1), &fp(2)),
            Some(Begin::Mismatch)
        ));
        assert!(cache.answer(&id(2), &fp(1)).is_none());
    }

    #[test]
    fn a_removal_published_while_the_reply_was_on_its_way_keeps_nothing() {
        let cache = live();
        let ticket = cache.ticket(&id(1)).expect("subscribed");
        // The script read the completed record; another instance removed it
        // and its message arrived before this reply was handled.
        cache.changed(&id(1));
        fill_paid(&cache, ticket);
        assert!(cache.answer(&id(1), &fp(1)).is_none());
    }

    #[test]
    fn a_removal_forgets_the_record() {
        let cache = live();
        keep(&cache, 1, &Outcome::new(b"paid".to_vec()), later());
        cache.changed(&id(1));
        assert!(cache.answer(&id(1), &fp(1)).is_none());
    }

    #[test]
    fn nothing_is_kept_or_answered_without_the_subscription() {
        let cache = ReplayCache::new(1 << 20, Duration::from_mins(1));
        assert!(cache.ticket(&id(1)).is_none(), "never subscribed");
        cache.subscribed();
        let ticket = cache.ticket(&id(1)).expect("subscribed");
        fill_paid(&cache, ticket);
        cache.unsubscribed();
        assert!(cache.answer(&id(1), &fp(1)).is_none(), "emptied");
        // A reply sent before the loss and handled after it is not kept.
        fill_paid(&cache, ticket);
        cache.subscribed();
        assert!(cache.answer(&id(1), &fp(1)).is_none());
    }

    #[test]
    fn an_entry_lives_no_longer_than_its_record_nor_max_age() {
        let cache = live();
        keep(&cache, 1, &Outcome::new(b"paid".to_vec()), Instant::now());
        assert!(cache.answer(&id(1), &fp(1)).is_none(), "the record expired");

        let short = ReplayCache::new(1 << 20, Duration::ZERO);
        short.subscribed();
        keep(&short, 1, &Outcome::new(b"paid".to_vec()), later());
        assert!(short.answer(&id(1), &fp(1)).is_none(), "older than max_age");
    }

    #[test]
    fn the_cache_holds_no_more_than_its_bytes() {
        let cache = ReplayCache::new(64 * 1024, Duration::from_mins(1));
        cache.subscribed();
        for n in 0..=255u8 {
            keep(&cache, n, &Outcome::new(vec![n; 1024]), later());
        }
        let kept = (0..=255u8)
            .filter(|n| cache.answer(&id(*n), &fp(*n)).is_some())
            .count();
        assert!(
            kept > 0 && kept <= 64,
            "{kept} entries of 1 KiB kept in 64 KiB"
        );
    }
}
