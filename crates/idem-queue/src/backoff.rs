//! `Backoff`: how long a message waits before it is delivered again.

use std::time::Duration;

/// Delays between deliveries of a message that could not be settled yet
/// (a transient failure, a store that is down): `first` after the first
/// delivery, doubling with each delivery up to `max`. Never zero, so that a
/// failing message never spins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first delivery.
    pub first: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// 200 ms, doubling up to 30 s.
    fn default() -> Self {
        Self {
            first: Duration::from_millis(200),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The delay before the delivery that follows delivery number
    /// `deliveries` (1 the first).
    pub fn after(&self, deliveries: u32) -> Duration {
        let first = self.first.max(Duration::from_millis(1));
        let doublings = deliveries.saturating_sub(1).min(30);
        first
            .checked_mul(1 << doublings)
            .unwrap_or(self.max)
            .min(self.max.max(first))
    }

    /// A delay the broker asked for (`wanted`, a lease's time left), kept
    /// between `first` and `max`.
    pub(crate) fn bounded(&self, wanted: Duration) -> Duration {
        wanted.clamp(
            self.first.max(Duration::from_millis(1)),
            self.max.max(self.first),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_first_up_to_the_max_and_are_never_zero() {
        let b = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let ms = |n| b.after(n).as_millis();
        assert_eq!(
            [ms(0), ms(1), ms(2), ms(3), ms(4), ms(5), ms(60)],
            [100, 100, 200, 400, 800, 1000, 1000]
        );
        let zero = Backoff {
            first: Duration::ZERO,
            max: Duration::ZERO,
        };
        assert!(zero.after(1) > Duration::ZERO);
        assert_eq!(b.bounded(Duration::from_secs(9)), Duration::from_secs(1));
        assert_eq!(b.bounded(Duration::ZERO), Duration::from_millis(100));
    }
}
