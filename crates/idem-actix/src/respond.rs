//! The answer pipeline for actix-web: [`Answers`], actix-web's answers as
//! [`idem_http::adapter::start`] and [`idem_http::adapter::answer_claimed`] handle them, and `respond`, which runs a handler
//! through it. The middleware and the attribute's handlers both answer
//! through here.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use actix_web::body::BoxBody;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use idem_core::{Call, Claim, Engine};
use idem_http::adapter::{AnswerBody, Detached, Framework, Started};
use idem_http::{Problem, RecordedResponse, Settings, Unreadable};

use crate::body::{FromActix, ToActix};
use crate::problem::problem_response;

/// What a handler answered: a response, or an error that actix-web renders
/// as one.
pub(crate) type Answer = Result<HttpResponse, actix_web::Error>;

/// An answer without its body: the response's head, and the error it was
/// rendered from, if it was one (answered as the error, which renders the
/// same).
pub(crate) type Head = (HttpResponse<()>, Option<actix_web::Error>);

/// actix-web's answers, under a route's settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answers(pub(crate) Settings);

impl Framework for Answers {
    type Answer = Answer;
    type Head = Head;
    type Body = FromActix;

    fn settings(&self) -> Settings {
        self.0
    }

    fn split(&self, answer: Answer) -> Result<(Head, FromActix), Answer> {
        // An error is recorded as actix-web renders it.
        let (response, error) = match answer {
            Ok(response) => (response, None),
            Err(e) => (e.error_response(), Some(e)),
        };
        let (response, body) = response.into_parts();
        Ok(((response, error), FromActix(Box::pin(body))))
    }

    fn status(&self, (response, _): &Head) -> u16 {
        response.status().as_u16()
    }

    fn headers<'h>(&self, (response, _): &'h Head) -> Vec<(&'h str, &'h [u8])> {
        response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect()
    }

    fn join(&self, (response, error): Head, body: AnswerBody<FromActix>) -> Answer {
        let body = match body {
            AnswerBody::Unread(FromActix(body)) => *Pin::into_inner(body),
            AnswerBody::Whole { data, .. } => BoxBody::new(data),
            AnswerBody::Unrecordable(rest) => BoxBody::new(ToActix(Box::pin(rest))),
        };
        let response = response.set_body(body);
        error.map_or(Ok(response), Err)
    }

    fn replay(&self, recorded: RecordedResponse) -> Result<Answer, Unreadable> {
        let status = StatusCode::from_u16(recorded.status).map_err(|_| Unreadable("status"))?;
        let mut response = HttpResponse::with_body(status, BoxBody::new(recorded.body));
        let headers = response.headers_mut();
        for (name, value) in recorded.headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| Unreadable("header name"))?;
            let value =
                HeaderValue::from_maybe_shared(value).map_err(|_| Unreadable("header value"))?;
            headers.append(name, value);
        }
        Ok(Ok(response))
    }

    fn problem(&self, problem: &Problem) -> Answer {
        Ok(problem_response(problem))
    }

    fn nobody(&self) -> Answer {
        Ok(HttpResponse::NoContent().finish())
    }
}

/// Runs `op` through `engine` for `call` ([`idem_http::adapter::start`], then
/// [`idem_http::adapter::answer_claimed`]), recording its answer, and answers with
/// it, a replay, or a problem.
///
/// The claim is taken in the request's own task, where a replay or a
/// refusal is answered; a client that went away meanwhile has a claim that
/// lands released (nothing ran; the retry runs it). Everything from the
/// claim on is [`Detached`]: if actix-web drops the request (the client
/// hung up), the rest runs on a task of the worker's own and its answer is
/// recorded, so the retry gets the replay, never a second execution.
/// Dropped before the handler started, the claim is released instead. A
/// handler that panics answers 500; its claim is kept until the lease ends.
pub(crate) async fn respond<F, Fut>(engine: Engine, call: Call, settings: Settings, op: F) -> Answer
where
    F: FnOnce(Claim) -> Fut + 'static,
    Fut: Future<Output = Answer> + 'static,
{
    let answers = Answers(settings);
    let claimed = match idem_http::adapter::start(&answers, &engine, &call).await {
        Started::Answered(answer) => return answer,
        Started::Claimed(claimed) => claimed,
    };
    let record = *call.record_id();
    Detached::new(
        |gone| async move {
            idem_http::adapter::answer_claimed(&answers, &engine, &call, claimed, op, gone).await
        },
        spawn_on_worker,
    )
    .await
    .unwrap_or_else(|| idem_http::adapter::panicked(&answers, &record))
}

/// The `spawn` for a dropped request: actix-web's futures live on their
/// worker's thread, so the rest runs on a task of that worker.
fn spawn_on_worker<F: Future + 'static>(future: Pin<Box<F>>) {
    // Outside a worker (its local task set already gone, as the server
    // shuts down) the spawn panics: the future can then only be dropped.
    let spawned = std::panic::catch_unwind(AssertUnwindSafe(|| actix_web::rt::spawn(future)));
    match spawned {
        Ok(_) => {
            tracing::debug!(target: "idem", decision = idem_core::Decision::Detached.as_str(), "the caller went away; the idempotent part finishes on its own task");
        }
        Err(_) => {
            tracing::warn!(target: "idem", decision = idem_core::Decision::Abandoned.as_str(), "the caller went away outside an actix-web worker; the operation is dropped mid-way and its claim kept until the lease ends");
        }
    }
}
