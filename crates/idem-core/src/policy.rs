//! `Policy`: how the engine keeps records (lifetime, lease, duplicates in
//! flight), and the per-call `Overrides` of it.

use std::time::Duration;

/// The default lease: how long a claim lives without renewal.
///
/// It bounds how long a holder that crashed (or stalled, or whose caller
/// dropped the operation mid-way) keeps its key from every retry: 10 seconds.
/// A running operation never feels it, since the engine renews the lease every
/// third of it while the operation runs, so a slow operation keeps its claim
/// as long as the store answers one renewal in each 10-second window. A
/// shorter lease frees keys sooner but loses the claim of a live holder when
/// the store stays unreachable for longer than the lease (the holder's result
/// is then not recorded, and a retry after the takeover runs it again; pass
/// the fencing token downstream to refuse the late holder).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// What to do when a duplicate arrives while the first request still runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnInFlight {
    /// Answer [`Error::InFlight`](crate::Error::InFlight) at once, with the time left on the lease.
    #[default]
    Reject,
    /// Poll with backoff for up to `max`: replay the first result if it lands in
    /// time, run the operation if the first holder gave up, else answer
    /// [`Error::InFlight`](crate::Error::InFlight).
    Wait {
        /// The longest time to wait.
        max: Duration,
    },
}

/// How the engine keeps records. Cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    ttl: Duration,
    lease: Duration,
    on_in_flight: OnInFlight,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            ttl: Duration::from_hours(24),
            lease: DEFAULT_LEASE,
            on_in_flight: OnInFlight::Reject,
        }
    }
}

pub(crate) const MIN_DURATION: Duration = Duration::from_millis(1);

impl Policy {
    /// How long a completed record is kept (default 24h, at least 1ms).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(MIN_DURATION);
        self
    }

    /// How long a claim lives without renewal (default [`DEFAULT_LEASE`], 10s;
    /// at least 1ms). While the operation runs, the engine renews it every
    /// third of this. It is also how long a key stays claimed after its holder
    /// crashed or its operation was dropped mid-way: see [`Engine::run`](crate::Engine::run).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(MIN_DURATION);
        self
    }

    /// What a duplicate in flight gets (default [`OnInFlight::Reject`]).
    #[must_use]
    pub fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.on_in_flight = on_in_flight;
        self
    }

    /// The configured record lifetime.
    pub fn ttl_value(&self) -> Duration {
        self.ttl
    }

    /// The configured lease.
    pub fn lease_value(&self) -> Duration {
        self.lease
    }

    /// The configured duplicate handling.
    pub fn on_in_flight_value(&self) -> OnInFlight {
        self.on_in_flight
    }
}

/// Per-call overrides of the engine's [`Policy`]: what a [`Call`](crate::Call),
/// the HTTP adapter's extractor and the attribute set for one operation.
/// Unset values come from the engine's policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    ttl: Option<Duration>,
    lease: Option<Duration>,
    on_in_flight: Option<OnInFlight>,
}

impl Overrides {
    /// Overrides the record lifetime (at least 1ms).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl.max(MIN_DURATION));
        self
    }

    /// Overrides the lease (at least 1ms).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease.max(MIN_DURATION));
        self
    }

    /// Overrides what a duplicate in flight gets.
    #[must_use]
    pub fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.on_in_flight = Some(on_in_flight);
        self
    }

    /// `policy` with these overrides applied.
    pub fn apply(&self, policy: &Policy) -> Policy {
        Policy {
            ttl: self.ttl.unwrap_or(policy.ttl),
            lease: self.lease.unwrap_or(policy.lease),
            on_in_flight: self.on_in_flight.unwrap_or(policy.on_in_flight),
        }
    }
}
