//! `Framework`: what the answer pipeline needs to know of a web framework's
//! answers. An adapter implements it once, for its framework's types.

use std::future::Future;

use idem_core::Outcome;

use crate::problem::Problem;
use crate::record::{RecordedResponse, Unreadable};
use crate::settings::Settings;

/// An answer read for recording ([`Framework::record`]).
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

/// A web framework's answers, as the pipeline ([`answer`](crate::answer))
/// handles them. The adapter's value carries the route's settings.
///
/// A framework's answer is what its handlers return and what its servers
/// send: axum's `Response`, actix-web's `Result<HttpResponse, Error>`,
/// tonic's `Result<Response<Body>, S::Error>`.
pub trait Framework {
    /// What a handler answers, and what the pipeline answers with.
    type Answer;

    /// The route's settings: what is read and recorded, and what a covered
    /// handler reads with [`current_settings`](crate::current_settings).
    fn settings(&self) -> Settings;

    /// Reads `answer` for recording, under the route's record policy and
    /// response body limit (see [`buffer_body`](crate::buffer_body)).
    fn record(&self, answer: Self::Answer) -> impl Future<Output = Recording<Self::Answer>>;

    /// The recorded response, back in the framework's types (the
    /// `Idempotent-Replayed` mark is among its headers).
    ///
    /// # Errors
    ///
    /// The part of the record that the framework cannot represent.
    fn replay(&self, recorded: RecordedResponse) -> Result<Self::Answer, Unreadable>;

    /// The answer for one of idem's problems.
    fn problem(&self, problem: &Problem) -> Self::Answer;

    /// The record retries get in place of an answer that could not be
    /// recorded (by default the `response-not-recorded` problem).
    fn not_recorded(&self) -> Outcome;

    /// The answer of a handler that was never started because its caller
    /// went away first: nobody reads it.
    fn nobody(&self) -> Self::Answer;
}
