//! `Recording`: an answer read for its record under the route's settings,
//! the same steps for every adapter ([`record_answer`]).

use http::HeaderMap;
use idem_core::Outcome;

use crate::body::{buffer_body, BufferedBody};
use crate::framework::{AnswerBody, Classified, Framework};
use crate::record::encode_with_trailers;

/// An answer read for recording ([`record_answer`]).
#[derive(Debug)]
pub enum Recording<A> {
    /// Serve the answer; retries get `outcome`, its record.
    Record(A, Outcome),
    /// Serve the answer; it cannot be recorded (its body is larger than the
    /// limit, or failed midway): retries get
    /// [`not_recorded`](Framework::not_recorded)'s stand-in, since the
    /// handler ran and must not run again.
    Unrecordable(A),
    /// Serve the answer and record nothing: the record policy leaves it out
    /// (a 5xx, a transient gRPC code) or there is no response at all. The
    /// claim is released and a retry runs the handler again.
    Release(A),
}

/// Reads `answer` for recording: split into its head and body, classified
/// by the record policy, its body read within the route's limit, encoded
/// ([`encode_with_trailers`]) and put together again to be served.
pub async fn record_answer<F: Framework>(framework: &F, answer: F::Answer) -> Recording<F::Answer> {
    let (head, body) = match framework.split(answer) {
        Ok(split) => split,
        Err(answer) => return Recording::Release(answer),
    };
    let classified = framework.classify(&head);
    if classified == Classified::Release {
        return Recording::Release(framework.join(head, AnswerBody::Unread(body)));
    }
    let limit = framework.settings().max_response_body;
    let (data, trailers) = match buffer_body(body, limit).await {
        BufferedBody::Whole { data, trailers } => (data, trailers),
        BufferedBody::Unrecordable(rest) => {
            let answer = framework.join(head, AnswerBody::Unrecordable(rest));
            return Recording::Unrecordable(answer);
        }
    };
    // Trailers are recorded and replayed only where the framework says so
    // (gRPC's final status); elsewhere, neither.
    let trailers = trailers.filter(|_| F::TRAILERS);
    if classified == Classified::AtEnd && !framework.records_at_end(&head, trailers.as_ref()) {
        return Recording::Release(framework.join(head, AnswerBody::Whole { data, trailers }));
    }
    let outcome = encode_with_trailers(
        framework.status(&head),
        &framework.headers(&head),
        &data,
        &trailers.as_ref().map(fields).unwrap_or_default(),
    );
    let answer = framework.join(head, AnswerBody::Whole { data, trailers });
    Recording::Record(answer, outcome)
}

/// A header map's fields, every value in order.
pub fn fields(headers: &HeaderMap) -> Vec<(&str, &[u8])> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect()
}
