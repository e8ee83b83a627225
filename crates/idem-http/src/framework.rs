//! `Framework`: what the answer pipeline needs to know of a web framework's
//! answers. An adapter implements it once, for its framework's types, in
//! nouns: how an answer splits into a head and a body, what the head's
//! status and headers are, and how an answer is put back together. Reading,
//! recording and rebuilding an answer are idem-http's own
//! ([`record`](crate::adapter::record_answer)).

use bytes::Bytes;
use http::HeaderMap;
use idem_core::Outcome;

use crate::body::{BoxError, UnrecordableBody};
use crate::problem::Problem;
use crate::record::{RecordedResponse, Unreadable};
use crate::settings::Settings;

/// What an answer's head says of recording it. HTTP answers are decided by
/// their status; a gRPC answer's final status may come in the trailers, at
/// the body's end (tower-http's response classifiers make the same split).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classified {
    /// Recorded: read the body for its record.
    Record,
    /// Not recorded (the record policy leaves it out): served unread, and
    /// the claim released so that a retry runs again.
    Release,
    /// Read the body, then ask [`Framework::records_at_end`] with its
    /// trailers.
    AtEnd,
}

/// An answer's body, handed back to the adapter to put the answer together
/// again ([`Framework::join`]).
#[derive(Debug)]
pub enum AnswerBody<B> {
    /// The body as the handler gave it, unread (the answer is not
    /// recorded).
    Unread(B),
    /// The body read whole for its record: its data and its trailers.
    Whole {
        /// Every data frame, in order.
        data: Bytes,
        /// The trailers, if any came.
        trailers: Option<HeaderMap>,
    },
    /// A body larger than the limit, or failed midway: what was read, then
    /// the rest as it streams.
    Unrecordable(UnrecordableBody<B>),
}

/// A web framework's answers, as the pipeline ([`answer`](crate::adapter::answer))
/// handles them. The adapter's value carries the route's settings.
///
/// A framework's answer is what its handlers return and what its servers
/// send: axum's `Response`, actix-web's `Result<HttpResponse, Error>`,
/// tonic's `Result<Response<Body>, S::Error>`.
pub trait Framework {
    /// What a handler answers, and what the pipeline answers with.
    type Answer;

    /// An answer without its body: its status and headers, and whatever
    /// else it takes to put the answer together again.
    type Head;

    /// An answer's body.
    type Body: http_body::Body<Data = Bytes, Error: Into<BoxError>>;

    /// Whether trailers are recorded with the body and replayed (gRPC's
    /// final status); otherwise they are neither.
    const TRAILERS: bool = false;

    /// The route's settings: what is read and recorded, and what a covered
    /// handler reads with [`current_settings`](crate::current_settings).
    fn settings(&self) -> Settings;

    /// Splits `answer` into its head and body, or hands it back when it is
    /// no response to record (a gRPC service's error): it is served, and
    /// the claim released.
    ///
    /// # Errors
    ///
    /// The answer itself, when it has no response.
    fn split(&self, answer: Self::Answer) -> Result<(Self::Head, Self::Body), Self::Answer>;

    /// The head's status code.
    fn status(&self, head: &Self::Head) -> u16;

    /// The head's headers, every value in order, names lowercase.
    fn headers<'h>(&self, head: &'h Self::Head) -> Vec<(&'h str, &'h [u8])>;

    /// Puts an answer together again from its head and its body.
    fn join(&self, head: Self::Head, body: AnswerBody<Self::Body>) -> Self::Answer;

    /// What the head says of recording the answer; by default, the route's
    /// record policy on its status.
    fn classify(&self, head: &Self::Head) -> Classified {
        if self.settings().record.records(self.status(head)) {
            Classified::Record
        } else {
            Classified::Release
        }
    }

    /// For an answer classified [`Classified::AtEnd`]: whether it is
    /// recorded, now that its body's `trailers` came.
    fn records_at_end(&self, head: &Self::Head, trailers: Option<&HeaderMap>) -> bool {
        let _ = (head, trailers);
        true
    }

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
    /// recorded (by default the `response-not-recorded` problem, as
    /// recorded by [`not_recorded`](crate::adapter::not_recorded)).
    fn not_recorded(&self) -> Outcome {
        crate::problem::not_recorded(self.settings().max_response_body)
    }

    /// The answer of a handler that was never started because its caller
    /// went away first: nobody reads it.
    fn nobody(&self) -> Self::Answer;
}
