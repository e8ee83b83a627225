//! # idem-http
//!
//! The HTTP rules of idem, written once for every framework adapter
//! (`idem-axum` today): how the `Idempotency-Key` header is read, what makes
//! two requests the same request, how a response is recorded and read back
//! byte for byte, which answers are recorded, and the problem kinds idem
//! answers with. It works on plain strings, bytes and numbers, so that an
//! adapter on any `http` crate version (or none) uses it as it is.

mod fingerprint;
mod headers;
mod problem_kind;
mod record;
mod record_policy;

pub use fingerprint::{add_body, request_fingerprint};
pub use headers::{is_json, key_from_values, KeyHeaderError, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use problem_kind::{problem_body, ProblemKind, PROBLEM_TYPE_PREFIX};
pub use record::{decode, encode, RecordedResponse, Unreadable};
pub use record_policy::RecordPolicy;
