//! `InFlight`: the claimed work one engine runs in this process (its
//! operations, those whose caller went away included, and the recording of
//! their results), counted so that a process can refuse more than it can
//! carry and, on shutdown, wait for what it runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// How long a caller refused for load is told to wait before it retries.
pub(crate) const OVERLOADED_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The count of claimed work running, and its bound.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// At most this many at once (`None`: unbounded).
    limit: Option<usize>,
    count: AtomicUsize,
    /// Woken each time the count falls to zero.
    idle: Notify,
}

/// One piece of claimed work, counted until the last of its holders drops
/// it.
#[derive(Debug)]
pub(crate) struct Entered(Arc<InFlight>);

impl InFlight {
    /// At most `limit` at once.
    pub(crate) fn bounded(limit: Option<usize>) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// The bound.
    pub(crate) fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// Counts one more, unless the bound is reached.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<Entered> {
        let limit = self.limit.unwrap_or(usize::MAX);
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Entered(Arc::clone(self)))
    }

    /// How many run now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Waits until none runs, at most `within`; whether none does.
    pub(crate) async fn drained(&self, within: Duration) -> bool {
        let wait = async {
            loop {
                let idle = self.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if self.count() == 0 {
                    return;
                }
                idle.await;
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_bound_refuses_the_one_too_many_and_the_drain_waits_for_the_last() {
        let in_flight = Arc::new(InFlight::bounded(Some(2)));
        let first = in_flight.enter().expect("first");
        let second = in_flight.enter().expect("second");
        assert!(in_flight.enter().is_none(), "a third is refused");
        drop(first);
        let third = in_flight.enter().expect("room again");
        assert!(!in_flight.drained(Duration::from_millis(10)).await);
        let waiting = tokio::spawn({
            let in_flight = Arc::clone(&in_flight);
            async move { in_flight.drained(Duration::from_secs(10)).await }
        });
        drop((second, third));
        assert!(waiting.await.expect("drain"), "drained once the last ended");
        assert_eq!(in_flight.count(), 0);
    }
}
