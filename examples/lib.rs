//! Runnable examples of idem, and the code they share with the tests:
//! `cargo run --example payments` and `cargo run --example queue_consumer`
//! from the repository root.

#[path = "payments/app.rs"]
pub mod payments;
