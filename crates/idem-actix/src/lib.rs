//! # idem-actix
//!
//! The actix-web 4 adapter of idem: [`Idempotency`] middleware with the same
//! `Idempotency-Key` semantics and `application/problem+json` answers as
//! `idem-axum`, built on the same framework-neutral rules (`idem-http`):
//! the key header, the fingerprint of method, route pattern, path, sorted
//! query and canonical JSON body, the recorded response byte for byte, and
//! the record policy.
//!
//! | request | answer |
//! | --- | --- |
//! | first with its key | the handler runs; its response is recorded (5xx is not, by default) |
//! | retry, same request | the recorded response, byte for byte, with `Idempotent-Replayed: true` |
//! | retry while the first still runs | 409 `request-in-flight`, `Retry-After: 1` |
//! | same key, another request | 422 `key-reused` |
//! | no key / a malformed key | 400 `key-missing` / `key-malformed` |
//! | body over the limit | 413 `request-too-large`, nothing runs |
//! | store down | 503 `store-unavailable`, `Retry-After`, nothing runs |
//! | response over the record limit | served; retries get 500 `response-not-recorded` |
//! | the client hangs up mid-handler | the handler finishes and its response is recorded |

mod idempotency;
mod middleware;
mod problem;
mod record;

pub use idem_http::{RecordPolicy, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use idempotency::Idempotency;
pub use middleware::IdempotencyMiddleware;
