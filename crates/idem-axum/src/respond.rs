//! The answer pipeline for axum: [`Answers`], axum's answers as
//! [`idem_http::start`] and [`idem_http::answer_claimed`] handle them, and
//! `respond`, which runs a handler through them.

use std::future::Future;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use idem_core::{Call, Claim, Engine, Outcome};
use idem_http::{
    buffer_body, spawn_on_tokio, BufferedBody, Detached, Framework, RecordedResponse, Recording,
    Settings, Started, Unreadable,
};

use crate::problem::Problem;
use crate::record::{encode, response_of};

/// axum's answers, under a route's settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answers(pub(crate) Settings);

impl Framework for Answers {
    type Answer = Response;

    fn settings(&self) -> Settings {
        self.0
    }

    async fn record(&self, response: Response) -> Recording<Response> {
        if !self.0.record.records(response.status().as_u16()) {
            return Recording::Release(response);
        }
        let (parts, body) = response.into_parts();
        match buffer_body(body, self.0.max_response_body).await {
            // Trailers are neither recorded nor replayed.
            BufferedBody::Whole { data, .. } => {
                let outcome = encode(parts.status, &parts.headers, &data);
                Recording::Record(Response::from_parts(parts, Body::from(data)), outcome)
            }
            BufferedBody::Unrecordable(rest) => {
                Recording::Unrecordable(Response::from_parts(parts, Body::new(rest)))
            }
        }
    }

    fn replay(&self, recorded: RecordedResponse) -> Result<Response, Unreadable> {
        response_of(recorded)
    }

    fn problem(&self, problem: &idem_http::Problem) -> Response {
        Problem::from(problem.clone()).into_response()
    }

    fn not_recorded(&self) -> Outcome {
        idem_http::not_recorded(self.0.max_response_body)
    }

    fn nobody(&self) -> Response {
        Response::default()
    }
}

/// Runs `handler` through the engine for `call` ([`idem_http::start`], then
/// [`idem_http::answer_claimed`]), and answers with the handler's response,
/// a replay, or a problem.
///
/// The claim is taken in the connection's own task: a replay or a refusal
/// is answered there, and a client that went away meanwhile has a claim
/// that lands released (nothing ran; the retry runs it). Everything from
/// the claim on is [`Detached`]: driven in the connection's own task, and,
/// if that task drops it (the client hung up, or a timeout layer above gave
/// up), handed whole to a task of its own. The handler is never cancelled
/// half-way: it runs to its end and its response is recorded whether or not
/// anyone still listens, so the retry gets the replay (or 409 while it
/// still runs), never a second execution. Dropped before the handler
/// started, the claim is released instead. A handler that panics answers
/// 500; its claim is kept until the lease ends.
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
    let answers = Answers(settings);
    let claimed = match idem_http::start(&answers, &engine, &call).await {
        Started::Answered(answer) => return answer,
        Started::Claimed(claimed) => claimed,
    };
    let record = *call.record_id();
    let handler = |claim| async move { handler(claim).await.into_response() };
    Detached::new(
        |gone| async move {
            idem_http::answer_claimed(&answers, &engine, &call, claimed, handler, gone).await
        },
        spawn_on_tokio,
    )
    .await
    .unwrap_or_else(|| idem_http::panicked(&answers, &record))
}
