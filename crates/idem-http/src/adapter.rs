//! An adapter author's names: what it takes to put a web framework behind
//! idem. The builder every adapter shares ([`Idempotency`](crate::Idempotency)
//! over an [`Adapter`]), reading a covered request (its key, scope and body)
//! into a call, the answer pipeline over a [`Framework`] (for a framework
//! that answers with `http::Response`, an [`HttpFramework`] and its
//! [`HttpAnswers`]), recording an answer, and [`Detached`], which keeps a
//! handler from being cancelled half-way.

pub use crate::adapter_trait::{Adapter, ScopeFrom};
pub use crate::body::{buffer_body, read_request_body, BoxError, BufferedBody, UnrecordableBody};
pub use crate::coverage::Coverage;
pub use crate::covered_request::{read_call, RequestLine};
pub use crate::detached::{spawn_on_tokio, CallerGone, Detached};
pub use crate::fingerprint::{add_body, request_fingerprint};
pub use crate::framework::{AnswerBody, Classified, Framework};
pub use crate::header_scope::scope_from_values;
pub use crate::headers::{is_json, key_from_values};
pub use crate::http_framework::{HttpAnswers, HttpFramework};
pub use crate::idempotency::TowerAdapter;
pub use crate::key_decision::{key_decision, KeyDecision};
pub use crate::pipeline::{
    answer, answer_claimed, commit_answer, panicked, respond, start, Started,
};
pub use crate::problem::not_recorded;
pub use crate::problem_kind::problem_body;
pub use crate::record::encode_with_trailers;
pub use crate::recording::{fields, record_answer, Recording};
#[cfg(feature = "grpc")]
pub use crate::retry_info::{retry_delay_in_details, retry_info_details};
