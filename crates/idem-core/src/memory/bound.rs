//! The memory store at its byte bound: what it evicts, and what it says
//! of it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::decision::Decision;

use super::{lock, Inner, WhenFull};

impl Inner {
    /// Evicts completed records, closest to expiry first, until the store
    /// holds at most `target` bytes or has nothing left to evict; returns
    /// how many it evicted.
    fn evict_down_to(&self, target: usize) -> u64 {
        let now = self.clock.now_micros();
        let (mut evicted, mut traces) = (0, 0u64);
        let mut soonest_left: Option<u64> = None;
        while self.bytes.load(Ordering::SeqCst) > target {
            let oldest = self
                .shards
                .iter()
                .enumerate()
                .filter_map(|(i, shard)| lock(shard).oldest().map(|o| (o, i)))
                .min();
            let Some(((at, id), i)) = oldest else { break };
            // Someone may have touched it since: then look again.
            if let Some(bytes) = lock(&self.shards[i]).evict(at, &id) {
                self.bytes.fetch_sub(bytes, Ordering::SeqCst);
                self.len.fetch_sub(1, Ordering::SeqCst);
                // Expired records (kept as traces) go first, as they are
                // closest to expiry; a live one lost its promise.
                if at > now {
                    evicted += 1;
                    soonest_left.get_or_insert(at - now);
                } else {
                    traces += 1;
                }
            }
        }
        if evicted > 0 {
            self.evictions.fetch_add(evicted, Ordering::SeqCst);
            let left = Duration::from_micros(soonest_left.unwrap_or(0));
            tracing::warn!(target: "idem", evicted, traces_evicted = traces, max_bytes = self.max_bytes, lifetime_left_s = left.as_secs(), decision = Decision::Evicted.as_str(), "memory store at its byte bound: evicted {evicted} completed records before their lifetime ended (the first with {left:?} left); a retry of one of them runs again: raise max_bytes, shorten the TTL, or use WhenFull::Refuse");
        } else if traces > 0 {
            tracing::debug!(target: "idem", traces_evicted = traces, max_bytes = self.max_bytes, "memory store at its byte bound: evicted traces of expired records; a late retry of one of them runs again");
        }
        evicted
    }

    /// Makes room at the bound: expired records first (at most one scan per
    /// 100 ms), then, if the policy allows, completed records closest to
    /// expiry, down to 1/32 under the bound so that evictions come in
    /// batches rather than on every request.
    pub(super) fn make_room(&self) {
        let now = self.clock.now_micros();
        let last = self.last_full_purge.load(Ordering::SeqCst);
        if now.saturating_sub(last) >= 100_000
            && self
                .last_full_purge
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.purge_expired();
        }
        if self.when_full == WhenFull::EvictOldest {
            self.evict_down_to(self.max_bytes - self.max_bytes / 32);
        }
    }
}
