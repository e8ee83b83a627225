//! Nothing but the home of `tests/ui.rs`: the compile-time behaviour of
//! `#[idempotent]`, checked with trybuild against the cases in `ui/`.
