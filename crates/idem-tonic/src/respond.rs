//! The answer pipeline for tonic: [`Answers`], a gRPC server's answers as
//! [`idem_http::adapter::respond`] handles them. A recorded call is its headers, its
//! message frames as sent, and its trailers with the final status, read
//! back byte for byte.

use std::marker::PhantomData;

use bytes::Bytes;
use http::response::Parts;
use http::{HeaderMap, Response};
use http_body::Frame;
use http_body_util::StreamBody;
use idem_core::Outcome;
use idem_http::adapter::{AnswerBody, BoxError, Classified, Coverage, Framework};
use idem_http::{Problem, RecordPolicy, RecordedResponse, Settings, Unreadable};
use tonic::body::Body;
use tonic::Code;

use crate::answer;
use crate::layer::Tonic;
use crate::record_codes::RecordCodes;

/// A gRPC server's answers (a response, or the service's error `E`) under
/// the layer's settings.
pub(crate) struct Answers<E> {
    /// The layer's bounds, and its record policy: by the final status,
    /// under `record`.
    settings: Settings,
    record: RecordCodes,
    error: PhantomData<fn() -> E>,
}

impl<E> Answers<E> {
    pub(crate) fn new(coverage: &Coverage<Tonic>) -> Self {
        // The layer's bounds; a gRPC answer is recorded by its final status,
        // under `record`, and its settings say so.
        let mut settings = Settings::default();
        settings.max_request_body = coverage.max_request_body;
        settings.max_response_body = coverage.max_response_body;
        settings.record = RecordPolicy::ByGrpcStatus;
        Self {
            settings,
            record: coverage.record,
            error: PhantomData,
        }
    }
}

// Not derived: that would ask `E: Clone` of the service's error.
impl<E> Clone for Answers<E> {
    fn clone(&self) -> Self {
        Self {
            settings: self.settings,
            record: self.record,
            error: PhantomData,
        }
    }
}

impl<E> Framework for Answers<E> {
    type Answer = Result<Response<Body>, E>;
    type Head = Parts;
    type Body = Body;
    const TRAILERS: bool = true;

    fn settings(&self) -> Settings {
        self.settings
    }

    fn split(&self, answer: Self::Answer) -> Result<(Parts, Body), Self::Answer> {
        // No response at all: nothing to record.
        answer.map(Response::into_parts).map_err(Err)
    }

    fn status(&self, head: &Parts) -> u16 {
        head.status.as_u16()
    }

    fn headers<'h>(&self, head: &'h Parts) -> Vec<(&'h str, &'h [u8])> {
        idem_http::adapter::fields(&head.headers)
    }

    fn join(&self, head: Parts, body: AnswerBody<Body>) -> Self::Answer {
        let body = match body {
            AnswerBody::Unread(body) => body,
            AnswerBody::Whole { data, trailers } => body_of(data, trailers),
            AnswerBody::Unrecordable(rest) => Body::new(rest),
        };
        Ok(Response::from_parts(head, body))
    }

    /// The final status is in the trailers, at the body's end.
    fn classify(&self, _head: &Parts) -> Classified {
        Classified::AtEnd
    }

    /// Recorded by the final status: in the trailers, or in the headers of
    /// a trailers-only response; a response with neither failed.
    fn records_at_end(&self, head: &Parts, trailers: Option<&HeaderMap>) -> bool {
        let code = trailers
            .and_then(grpc_status)
            .or_else(|| grpc_status(&head.headers))
            .unwrap_or(Code::Unknown);
        self.record.records(code)
    }

    fn replay(&self, recorded: RecordedResponse) -> Result<Self::Answer, Unreadable> {
        recorded.into_response(body_of).map(Ok)
    }

    fn problem(&self, problem: &Problem) -> Self::Answer {
        Ok(answer::response(problem))
    }

    /// A trailers-only `INTERNAL` status saying the call ran but its answer
    /// could not be recorded.
    fn not_recorded(&self) -> Outcome {
        let response = answer::response(&Problem::not_recorded(self.settings.max_response_body));
        idem_http::encode(
            response.status().as_u16(),
            &idem_http::adapter::fields(response.headers()),
            &[],
        )
    }

    fn nobody(&self) -> Self::Answer {
        Ok(tonic::Status::cancelled("the caller went away before the method started").into_http())
    }
}

fn grpc_status(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from(value.parse::<i32>().ok()?))
}

/// A body of `data` followed by `trailers`. Without either (a
/// trailers-only response: the status is in the headers) it is empty and
/// says so, so that the server ends the stream with the HEADERS frame, as
/// gRPC over HTTP/2 requires; a body that only finds out it is empty when
/// polled makes the server send an empty DATA frame to end the stream,
/// which spec-following clients read as a broken response.
fn body_of(data: Bytes, trailers: Option<HeaderMap>) -> Body {
    if data.is_empty() && trailers.is_none() {
        return Body::empty();
    }
    let frames = [
        (!data.is_empty()).then(|| Frame::data(data)),
        trailers.map(Frame::trailers),
    ];
    let stream = futures_util::stream::iter(frames.into_iter().flatten().map(Ok::<_, BoxError>));
    Body::new(StreamBody::new(stream))
}
