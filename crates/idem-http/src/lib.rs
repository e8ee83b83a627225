//! # idem-http
//!
//! The HTTP rules of idem, written once for every framework adapter
//! (idem-axum, idem-actix, idem-tonic): how the `Idempotency-Key` header is
//! read, what makes two requests the same request, how a response is
//! recorded and read back byte for byte, which answers are recorded, the
//! problem kinds idem answers with, and the answer pipeline that runs a
//! covered handler through the engine ([`answer`]). An adapter on `http`
//! types names its body type ([`HttpFramework`]); one with answers of its
//! own implements [`Framework`] for them. Each keeps only its framework's
//! types; the rules work on the `http` crate's types (the key header is an
//! [`http::HeaderName`]), strings, bytes and numbers, and bodies are read
//! through `http_body::Body`.

mod adapter;
mod body;
mod coverage;
mod covered_request;
mod detached;
mod fingerprint;
mod framework;
mod header_scope;
mod headers;
mod http_framework;
mod idempotency;
mod key_decision;
mod pipeline;
mod problem;
mod problem_format;
mod problem_kind;
mod record;
mod record_policy;
mod recording;
#[cfg(feature = "grpc")]
mod retry_info;
mod run;
mod settings;

pub use adapter::{Adapter, ScopeFrom};
pub use body::{buffer_body, read_request_body, BoxError, BufferedBody, UnrecordableBody};
pub use coverage::Coverage;
pub use covered_request::{read_call, RequestLine};
pub use detached::{spawn_on_tokio, CallerGone, Detached};
pub use fingerprint::{add_body, request_fingerprint};
pub use framework::{AnswerBody, Classified, Framework};
pub use header_scope::scope_from_values;
pub use headers::{is_json, key_from_values, KeyHeaderError, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use http_framework::{HttpAnswers, HttpFramework};
pub use idempotency::{Idempotency, TowerAdapter};
pub use key_decision::{key_decision, KeyDecision};
pub use pipeline::{answer, answer_claimed, commit_answer, panicked, respond, start, Started};
pub use problem::{not_recorded, Problem};
pub use problem_format::{reformat, ProblemFormat, ProblemFormatFuture, ProblemFormatService};
pub use problem_kind::{problem_body, ProblemKind, PROBLEM_TYPE_PREFIX};
pub use record::{
    decode, encode, encode_with_trailers, RecordedResponse, Unreadable, RECORD_FORMAT,
};
pub use record_policy::RecordPolicy;
pub use recording::{fields, record_answer, Recording};
#[cfg(feature = "grpc")]
pub use retry_info::{retry_delay_in_details, retry_info_details};
pub use run::{current_settings, hand_over};
pub use settings::Settings;
