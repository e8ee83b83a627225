//! `idem-axum` will provide the HTTP adapter of idem for axum: a tower `Layer` and an
//! extractor that follow the IETF Idempotency-Key draft (400 for a missing or bad
//! key, 409 with `Retry-After` while in flight, 422 for a reused key, problem+json
//! bodies, `Idempotent-Replayed: true` on byte-identical replays).
//!
//! **Status: not implemented yet.** This crate exports nothing today; its work is
//! tracked in the project's issue list. Until it lands, use `idem_core::MemoryStore`
//! with `idem_core::Engine`.
