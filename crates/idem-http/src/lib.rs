//! # idem-http
//!
//! The HTTP rules of idem, written once for every framework adapter
//! (`idem-axum` today): how the `Idempotency-Key` header is read, what makes
//! two requests the same request, how a response is recorded and read back
//! byte for byte, which answers are recorded, and the problem kinds idem
//! answers with. It works on plain strings, bytes and numbers, so that an
//! adapter on any `http` crate version (or none) uses it as it is.

mod detached;
mod fingerprint;
mod headers;
mod problem;
mod problem_kind;
mod record;
mod record_policy;
mod settings;

pub use detached::{spawn_on_tokio, CallerGone, Detached};
pub use fingerprint::{add_body, request_fingerprint};
pub use headers::{is_json, key_from_values, KeyHeaderError, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use problem::{not_recorded, Problem};
pub use problem_kind::{problem_body, ProblemKind, PROBLEM_TYPE_PREFIX};
pub use record::{decode, encode, encode_with_trailers, RecordedResponse, Unreadable};
pub use record_policy::RecordPolicy;
pub use settings::Settings;
