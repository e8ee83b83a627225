//! `idem-macros` will provide the `#[idempotent(...)]` attribute: placed on an
//! axum handler or on an async function (a queue consumer), it will generate the
//! key lookup, fingerprinting and result caching around the function body, with
//! every misuse reported as a compile error.
//!
//! **Status: not implemented yet.** This crate exports nothing today; the
//! attribute is tracked in the project's issue list. Use
//! [`idem_core::Engine`](https://docs.rs/idem-core) directly in the meantime.
