//! # idem-axum
//!
//! The HTTP adapter of idem for axum, following the IETF draft "The
//! Idempotency-Key HTTP Header Field" and Stripe's practice. Two ways in:
//!
//! - [`IdempotencyLayer`], a tower layer for whole routers, with a per-request
//!   scope (the authenticated principal, say);
//! - [`Idempotent`], an extractor for handlers that make themselves idempotent
//!   (the `#[idempotent]` attribute builds on it).
//!
//! ## The policy, as clients see it
//!
//! | situation | answer |
//! | --- | --- |
//! | key missing where required | 400, `urn:idem:problem:key-missing` |
//! | key malformed: empty, over 255 characters, not visible ASCII, sent twice | 400, `urn:idem:problem:key-malformed` |
//! | first request | the handler runs; its status, end-to-end headers and body are recorded |
//! | retry after completion, same request | the recorded status, headers and body, byte for byte, plus `Idempotent-Replayed: true` |
//! | retry while the first is in flight | 409, `urn:idem:problem:request-in-flight`, `Retry-After` (or a wait, per policy) |
//! | same key, different request | 422, `urn:idem:problem:key-reused`, nothing of the first answer |
//! | request body over the limit (default 1 MiB) | 413, `urn:idem:problem:request-too-large`; nothing runs |
//! | idempotency store unreachable | 503, `urn:idem:problem:store-unavailable`, `Retry-After`; the handler does not run |
//! | handler answers 5xx | not recorded (the claim is released, a retry runs again); [`RecordPolicy::All`] records it |
//! | response body over the limit (default 1 MiB) | served, not recorded; the claim is released |
//! | the handler outlived its claim, which was taken over | 409, `urn:idem:problem:lease-lost`, `Retry-After` |
//!
//! Every problem is `application/problem+json` (RFC 9457) with `type`,
//! `title`, `status` and a `detail` that says what to do. Records are kept for
//! the engine's TTL (24 hours by default): a key may be reused for a new
//! request only after that.
//!
//! The key is a bare token or an RFC 8941 quoted string (`"abc"` and `abc`
//! are the same key). A request is the same request when its method, route,
//! path, query parameters (in any order) and body match; a JSON body is
//! compared parsed, so key order and whitespace do not matter.

mod exec;
mod extract;
mod layer;
mod problem;
mod record;
mod service;

pub use exec::{RecordPolicy, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use extract::Idempotent;
pub use layer::IdempotencyLayer;
pub use problem::{Problem, ProblemKind, PROBLEM_TYPE_PREFIX};
pub use record::encode as encode_response;
pub use service::IdempotencyService;
