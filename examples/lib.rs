//! Runnable examples of idem; see the `[[example]]` targets of this package:
//! `cargo run --example queue_consumer` from the repository root.
