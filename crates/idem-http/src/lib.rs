//! # idem-http
//!
//! The HTTP rules of idem, written once for every framework adapter
//! (idem-axum, idem-actix, idem-tonic): how the `Idempotency-Key` header is
//! read, what makes two requests the same request, how a response is
//! recorded and read back byte for byte, which answers are recorded, the
//! problem kinds idem answers with, and the answer pipeline that runs a
//! covered handler through the engine ([`answer`](adapter::answer)).
//!
//! The root holds what an application meets (most reach it through their
//! adapter's crate): the key's headers, [`Problem`] and its
//! [`ProblemFormat`], the recorded response's [`encode`] and [`decode`],
//! the [`RecordPolicy`], and what a covered handler reads
//! ([`current_settings`]) and hands over ([`hand_over`]). An adapter
//! author's names are in [`adapter`]: an adapter on `http` types names its
//! body type ([`HttpFramework`](adapter::HttpFramework)); one with answers of
//! its own implements [`Framework`](adapter::Framework) for them. Each keeps
//! only its framework's types; the rules work on the `http` crate's types
//! (the key header is an [`http::HeaderName`]), strings, bytes and numbers,
//! and bodies are read through `http_body::Body`.

pub mod adapter;
mod adapter_trait;
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

// An application's (most reach them through their adapter's crate): the
// key's headers, the problems idem answers with and their format, the
// recorded response's encoding, the record policy, and what a covered
// handler reads and hands over. An adapter author's names are in
// `adapter`.
pub use headers::{KeyHeaderError, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use idempotency::Idempotency;
pub use problem::Problem;
pub use problem_format::{reformat, ProblemFormat, ProblemFormatFuture, ProblemFormatService};
pub use problem_kind::{ProblemKind, PROBLEM_TYPE_PREFIX};
pub use record::{decode, encode, RecordedResponse, Unreadable, RECORD_FORMAT};
pub use record_policy::RecordPolicy;
pub use run::{current_settings, hand_over};
pub use settings::Settings;
