//! Runnable examples of idem, and the code they share with the tests:
//! `cargo run --example payments` and `cargo run --example queue_consumer`
//! from the repository root.

#[path = "payments/app.rs"]
pub mod payments;

/// Serving a router with a header read timeout (used by the payments example).
#[path = "payments/serve.rs"]
pub mod serve;

/// The payments example's `/metrics`, in Prometheus's text format.
#[cfg(feature = "metrics")]
#[path = "payments/metrics.rs"]
pub mod metrics;
