//! Running a handler through the engine and answering: the response, its
//! replay, or the problem for an engine error.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;

use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use idem_core::{Call, Claim, Completion, Engine, Error, Execution};
use idem_http::{spawn_on_tokio, CallerGone, Detached};

use crate::commit_response::with_settings;
use crate::headers::IDEMPOTENT_REPLAYED;
use crate::problem::Problem;
use crate::record::{self, not_recorded, Buffered};
use idem_http::Settings;

/// Runs `handler` through the engine for `call`, recording its response, and
/// answers with the handler's response, a replay, or a problem.
///
/// Everything from the claim on is [`Detached`]: driven in the connection's
/// own task, and, if that task drops it (the client hung up, or a timeout
/// layer above gave up), handed whole to a task of its own. The handler is
/// never cancelled half-way: it runs to its end and its response is recorded
/// whether or not anyone still listens, so the retry gets the replay (or 409
/// while it still runs), never a second execution. A client that went away
/// before the handler started (while the claim was being taken) has its
/// claim released instead: nothing ran, and the retry runs it. A handler
/// that panics answers 500; its claim is kept until the lease ends.
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
    let record = *call.record_id();
    let detached = Detached::new(
        |gone| async move { run_recorded(&engine, &call, settings, handler, gone).await },
        spawn_on_tokio,
    );
    if let Ok(Some(response)) = AssertUnwindSafe(detached).catch_unwind().await {
        response
    } else {
        // Whatever the handler did may have taken effect: the engine keeps
        // the claim until its lease ends.
        tracing::error!(target: "idem", record = %record, "the handler panicked; its outcome is unknown and its claim is kept until the lease ends");
        Problem::from(idem_http::Problem::handler_failed()).into_response()
    }
}

async fn run_recorded<F, Fut, R>(
    engine: &Engine,
    call: &Call,
    settings: Settings,
    handler: F,
    gone: CallerGone,
) -> Response
where
    F: FnOnce(Claim) -> Fut,
    Fut: Future<Output = R>,
    R: IntoResponse,
{
    let max_response = settings.max_response_body;
    let record_policy = settings.record;
    let result = engine
        .execute(call, |claim| async move {
            if gone.before_start() {
                // Nobody waits for this answer, and nothing has run.
                return Completion::Release(Response::default());
            }
            let settled = claim.clone();
            let response = with_settings(settings, handler(claim))
                .await
                .into_response();
            // The handler settled its record itself, in its own transaction
            // (`commit_response`): the engine knows, nothing is encoded again.
            if settled.is_settled() {
                return Completion::Keep(response);
            }
            if !record_policy.records(response.status().as_u16()) {
                return Completion::Release(response);
            }
            match record::buffer(response, max_response).await {
                Buffered::Whole(response, outcome) => Completion::Record {
                    value: response,
                    outcome,
                },
                Buffered::NotRecordable(response) => {
                    // The handler ran: releasing would let a retry run it
                    // again. Retries get a stand-in that says so instead.
                    tracing::warn!(target: "idem", limit = max_response, "response not recorded: larger than the limit or unreadable; retries get a response-not-recorded problem");
                    Completion::Record {
                        value: response,
                        outcome: not_recorded(max_response),
                    }
                }
            }
        })
        .await;
    match result {
        Ok(Execution::Executed(response)) => response,
        Ok(Execution::Replayed(outcome)) => match record::decode(&outcome) {
            Ok(mut response) => {
                response
                    .headers_mut()
                    .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
                response
            }
            Err(e) => {
                tracing::error!(target: "idem", record = %call.record_id(), part = e.0, "recorded response cannot be decoded");
                Problem::from(idem_http::Problem::replay_unreadable()).into_response()
            }
        },
        Err(e) => error_response(&e).into_response(),
    }
}

/// The problem for an engine error.
pub(crate) fn error_response(e: &Error) -> Problem {
    idem_http::Problem::for_error(e).into()
}
