//! The answer pipeline for axum: [`Answers`], axum's answers in the nouns
//! [`idem_http::respond`] reads and records them by, and `respond`, which
//! runs a handler through it.

use std::future::Future;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::response::Parts;
use idem_core::{Call, Claim, Engine};
use idem_http::{AnswerBody, Framework, RecordedResponse, Settings, Unreadable};

use crate::problem::Problem;
use crate::record::response_of;

/// axum's answers, under a route's settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answers(pub(crate) Settings);

impl Framework for Answers {
    type Answer = Response;
    type Head = Parts;
    type Body = Body;

    fn settings(&self) -> Settings {
        self.0
    }

    fn split(&self, response: Response) -> Result<(Parts, Body), Response> {
        Ok(response.into_parts())
    }

    fn status(&self, head: &Parts) -> u16 {
        head.status.as_u16()
    }

    fn headers<'h>(&self, head: &'h Parts) -> Vec<(&'h str, &'h [u8])> {
        idem_http::fields(&head.headers)
    }

    fn join(&self, head: Parts, body: AnswerBody<Body>) -> Response {
        let body = match body {
            AnswerBody::Unread(body) => body,
            // Trailers are neither recorded nor replayed.
            AnswerBody::Whole { data, .. } => Body::from(data),
            AnswerBody::Unrecordable(rest) => Body::new(rest),
        };
        Response::from_parts(head, body)
    }

    fn replay(&self, recorded: RecordedResponse) -> Result<Response, Unreadable> {
        response_of(recorded)
    }

    fn problem(&self, problem: &idem_http::Problem) -> Response {
        Problem::from(problem.clone()).into_response()
    }

    fn nobody(&self) -> Response {
        Response::default()
    }
}

/// Runs `handler` through the engine for `call` ([`idem_http::respond`]),
/// and answers with the handler's response, a replay, or a problem. The
/// handler is never cancelled half-way: a client that hangs up (or a
/// timeout layer above that gives up) leaves it to run to its end on a task
/// of its own, and its response is recorded for the retry.
pub(crate) async fn respond<F, Fut, R>(
    engine: Engine,
    call: Call,
    settings: Settings,
    handler: F,
) -> Response
where
    F: FnOnce(Claim) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoResponse,
{
    let handler = |claim| async move { handler(claim).await.into_response() };
    idem_http::respond(Answers(settings), engine, call, handler).await
}
