//! Where the purge goes on from.
//!
//! PostgreSQL keeps a deleted row's index entries until a vacuum removes
//! them. The purge takes the oldest deadlines first, so every row it
//! deleted leaves entries at the head of the deadline index, and a scan
//! from the index's start would walk them all again, on every call: on a
//! table where 10 000 records expire a second, hundreds of thousands of
//! entries between two autovacuums, read by a purge that finds nothing to
//! do. So each store remembers the last deadline it purged and starts the
//! next scan there. A row it passed over (locked by a claim taking it
//! over at that moment, or a token ahead of the clock) is found by a scan
//! from the start, at most once a minute.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often a purge scans from the index's start.
const SWEEP_EVERY: Duration = Duration::from_mins(1);

/// The last deadline purged (µs since the epoch), shared by a store's
/// clones, and when the last scan from the start was.
#[derive(Debug, Default, Clone)]
pub(crate) struct PurgeCursor(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    last_us: AtomicI64,
    swept: Mutex<Option<Instant>>,
}

impl PurgeCursor {
    /// Where the next purge starts (µs since the epoch): the last deadline
    /// purged, or the epoch when a scan from the start is due.
    pub(crate) fn start(&self) -> i64 {
        let mut swept = self.0.swept.lock().unwrap_or_else(PoisonError::into_inner);
        if swept.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
            *swept = Some(Instant::now());
            return 0;
        }
        self.0.last_us.load(Ordering::SeqCst)
    }

    /// A purge deleted rows up to the deadline `last_us` (0: none).
    pub(crate) fn advance(&self, last_us: i64) {
        self.0.last_us.fetch_max(last_us, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_purge_starts_from_the_epoch_and_the_next_where_it_stopped() {
        let cursor = PurgeCursor::default();
        assert_eq!(cursor.start(), 0, "a scan from the start first");
        cursor.advance(1_764_000_000_000_000);
        cursor.advance(0);
        assert_eq!(cursor.start(), 1_764_000_000_000_000);
        cursor.advance(1_700_000_000_000_000);
        assert_eq!(cursor.start(), 1_764_000_000_000_000, "never backwards");
    }
}
