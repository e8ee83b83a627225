//! Running a handler through the engine and answering: its response, a
//! replay, or the problem for an engine error. The middleware and the
//! attribute's handlers both answer through here.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::HttpResponse;
use futures_util::FutureExt as _;
use idem_core::{Call, Claim, Completion, Engine, Execution};
use idem_http::{not_recorded, CallerGone, Detached, Problem, Settings, IDEMPOTENT_REPLAYED};

use crate::commit_response::with_settings;
use crate::problem::problem_response;
use crate::record::{self, Buffered};

/// What a handler answered: a response, or an error that actix-web renders
/// as one.
pub(crate) type Answer = Result<HttpResponse, actix_web::Error>;

/// Runs `op` through `engine` for `call`, recording its answer, and answers
/// with it, a replay, or a problem.
///
/// Everything from the claim on is [`Detached`]: if actix-web drops the
/// request (the client hung up), the rest runs on a task of the worker's own
/// and its answer is recorded, so the retry gets the replay, never a second
/// execution. A client that went away before the handler started (while
/// the claim was being taken) has its claim released instead: nothing ran,
/// and the retry runs it. A handler that panics answers 500; its claim is
/// kept until the lease ends.
pub(crate) async fn respond<F, Fut>(engine: Engine, call: Call, settings: Settings, op: F) -> Answer
where
    F: FnOnce(Claim) -> Fut + 'static,
    Fut: Future<Output = Answer> + 'static,
{
    let record = *call.record_id();
    let detached = Detached::new(
        |gone| async move { run(&engine, &call, settings, op, gone).await },
        spawn_on_worker,
    );
    if let Ok(Some(answer)) = AssertUnwindSafe(detached).catch_unwind().await {
        answer
    } else {
        // Whatever the handler did may have taken effect: the engine keeps
        // the claim until its lease ends.
        tracing::error!(target: "idem", record = %record, "the handler panicked; its outcome is unknown and its claim is kept until the lease ends");
        Ok(problem_response(&Problem::handler_failed()))
    }
}

/// The `spawn` for a dropped request: actix-web's futures live on their
/// worker's thread, so the rest runs on a task of that worker.
fn spawn_on_worker<F: Future + 'static>(future: Pin<Box<F>>) {
    // Outside a worker (its local task set already gone, as the server
    // shuts down) the spawn panics: the future can then only be dropped.
    let spawned = std::panic::catch_unwind(AssertUnwindSafe(|| actix_web::rt::spawn(future)));
    match spawned {
        Ok(_) => {
            tracing::debug!(target: "idem", decision = "detached", "the caller went away; the idempotent part finishes on its own task");
        }
        Err(_) => {
            tracing::warn!(target: "idem", decision = "outcome_unknown", "the caller went away outside an actix-web worker; the operation is dropped mid-way and its claim kept until the lease ends");
        }
    }
}

async fn run<F, Fut>(
    engine: &Engine,
    call: &Call,
    settings: Settings,
    op: F,
    gone: CallerGone,
) -> Answer
where
    F: FnOnce(Claim) -> Fut,
    Fut: Future<Output = Answer>,
{
    let result = engine
        .execute(call, |claim| async move {
            if gone.before_start() {
                // Nobody waits for this answer, and nothing has run.
                return Completion::Release(Ok(HttpResponse::NoContent().finish()));
            }
            let settled = claim.clone();
            let answer = with_settings(settings, op(claim)).await;
            // The handler settled its record itself, in its own transaction
            // (`commit_response`): the engine knows, nothing is encoded again.
            if settled.is_settled() {
                return Completion::Keep(answer);
            }
            let (response, error) = match answer {
                Ok(response) => (response, None),
                Err(e) => (e.error_response(), Some(e)),
            };
            if !settings.record.records(response.status().as_u16()) {
                return Completion::Release(error.map_or(Ok(response), Err));
            }
            let limit = settings.max_response_body;
            let (response, outcome) = match record::buffer(response, limit).await {
                Buffered::Whole(response, outcome) => (response, outcome),
                Buffered::NotRecordable(response) => {
                    // The handler ran: releasing would let a retry run it
                    // again. Retries get a stand-in that says so instead.
                    tracing::warn!(target: "idem", limit, "response not recorded: larger than the limit or unreadable; retries get a response-not-recorded problem");
                    (response, not_recorded(limit))
                }
            };
            // An error is answered as actix-web renders it, which is what
            // was just recorded.
            Completion::Record {
                value: error.map_or(Ok(response), Err),
                outcome,
            }
        })
        .await;
    match result {
        Ok(Execution::Executed(answer)) => answer,
        Ok(Execution::Replayed(outcome)) => Ok(match record::decode(&outcome) {
            Ok(mut response) => {
                response.headers_mut().insert(
                    HeaderName::from_static(IDEMPOTENT_REPLAYED),
                    HeaderValue::from_static("true"),
                );
                response
            }
            Err(e) => {
                tracing::error!(target: "idem", record = %call.record_id(), part = e.0, "recorded response cannot be decoded");
                problem_response(&Problem::replay_unreadable())
            }
        }),
        Err(e) => Ok(problem_response(&Problem::for_error(&e))),
    }
}
