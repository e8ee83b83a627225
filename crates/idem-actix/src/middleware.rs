//! `IdempotencyMiddleware`: the service `Idempotency` wraps around the
//! routes, and what it does with each request.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, Service, ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpMessage as _, HttpRequest, HttpResponse};
use bytes::{Bytes, BytesMut};
use futures_util::future::LocalBoxFuture;
use futures_util::{FutureExt as _, StreamExt as _};
use idem_core::{Call, Completion, Engine, Execution};
use idem_http::{
    add_body, is_json, key_from_values, not_recorded, request_fingerprint, Detached, Problem,
    Settings, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED,
};

use crate::idempotency::Config;
use crate::problem::problem_response;
use crate::record::{self, Buffered};

/// The service made by [`Idempotency`](crate::Idempotency).
pub struct IdempotencyMiddleware<S> {
    pub(crate) service: Rc<S>,
    pub(crate) engine: Engine,
    pub(crate) config: Arc<Config>,
}

impl<S> fmt::Debug for IdempotencyMiddleware<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyMiddleware")
            .finish_non_exhaustive()
    }
}

type Answer = Result<ServiceResponse<BoxBody>, actix_web::Error>;

impl<S, B> Service<ServiceRequest> for IdempotencyMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Answer>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        Box::pin(handle(
            Rc::clone(&self.service),
            self.engine.clone(),
            Arc::clone(&self.config),
            req,
        ))
    }
}

async fn handle<S, B>(
    service: Rc<S>,
    engine: Engine,
    config: Arc<Config>,
    mut req: ServiceRequest,
) -> Answer
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    if !config.methods.contains(req.method()) {
        return pass(service.call(req).await);
    }
    let key = key_from_values(
        req.headers()
            .get_all(IDEMPOTENCY_KEY)
            .map(HeaderValue::as_bytes),
    );
    let key = match key {
        Ok(Some(key)) => key,
        Ok(None) if config.key_required => return Ok(answer(req, &Problem::key_missing())),
        Ok(None) => return pass(service.call(req).await),
        Err(e) => return Ok(answer(req, &Problem::key_malformed(&e))),
    };
    let scope = match (config.scope)(&req) {
        Ok(scope) => scope,
        Err(status) => return Ok(req.into_response(HttpResponse::new(status))),
    };
    let limit = config.settings.max_request_body;
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Ok(answer(req, &Problem::too_large(limit)));
    }
    let bytes = match read_body(req.take_payload(), limit).await {
        Ok(bytes) => bytes,
        Err(problem) => return Ok(answer(req, &problem)),
    };

    let route = req.match_pattern();
    let mut fp = request_fingerprint(
        "http",
        req.method().as_str(),
        route.as_deref(),
        req.path(),
        Some(req.query_string()),
    );
    let json = is_json(
        req.headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    add_body(&mut fp, "body", json, &bytes);
    req.set_payload(Payload::from(bytes));
    let call = Call::new(scope, key, fp.finish()).with_operation("http");

    let record = *call.record_id();
    let detached = Detached::new(
        run(service, engine, call, config.settings, req),
        spawn_on_worker,
    );
    if let Ok(Some(answer)) = AssertUnwindSafe(detached).catch_unwind().await {
        answer
    } else {
        // Whatever the handler did may have taken effect: the engine keeps
        // the claim until its lease ends.
        tracing::error!(target: "idem", record = %record, "the handler panicked; its outcome is unknown and its claim is kept until the lease ends");
        Err(unbound(problem_response(&Problem::handler_failed())))
    }
}

/// The `spawn` for a dropped request: actix-web's futures live on their
/// worker's thread, so the rest runs on a task of that worker.
fn spawn_on_worker<F: Future + 'static>(future: Pin<Box<F>>) {
    tracing::debug!(target: "idem", decision = "detached", "the caller went away; the idempotent part finishes on its own task");
    drop(actix_web::rt::spawn(future));
}

/// Runs the handler through the engine and answers: its response, a replay
/// or a problem.
async fn run<S, B>(
    service: Rc<S>,
    engine: Engine,
    call: Call,
    settings: Settings,
    req: ServiceRequest,
) -> Answer
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    // The request waits here until the handler takes it; the handler's
    // request comes back through `after`. An answer needs one of them.
    let waiting = Cell::new(Some(req));
    let after: Cell<Option<HttpRequest>> = Cell::new(None);
    let (waiting_ref, after_ref) = (&waiting, &after);
    let result = engine
        .execute(&call, move |_claim| async move {
            let Some(req) = waiting_ref.take() else {
                return Completion::Release(Err(unbound(problem_response(
                    &Problem::handler_failed(),
                ))));
            };
            let (response, error) = match service.call(req).await {
                Ok(res) => {
                    let (req, response) = res.into_parts();
                    after_ref.set(Some(req));
                    (response.map_into_boxed_body(), None)
                }
                Err(e) => (e.error_response(), Some(e)),
            };
            if !settings.record.records(response.status().as_u16()) {
                return Completion::Release(error.map_or(Ok(response), Err));
            }
            let (response, outcome) = match record::buffer(response, settings.max_response_body).await {
                Buffered::Whole(response, outcome) => (response, outcome),
                Buffered::NotRecordable(response) => {
                    // The handler ran: releasing would let a retry run it
                    // again. Retries get a stand-in that says so instead.
                    tracing::warn!(target: "idem", limit = settings.max_response_body, "response not recorded: larger than the limit or unreadable; retries get a response-not-recorded problem");
                    (response, not_recorded(settings.max_response_body))
                }
            };
            // An error is answered as the framework renders it, which is
            // what was just recorded.
            Completion::Record {
                value: error.map_or(Ok(response), Err),
                outcome,
            }
        })
        .await;
    let response = match result {
        Ok(Execution::Executed(Ok(response))) => response,
        Ok(Execution::Executed(Err(e))) => return Err(e),
        Ok(Execution::Replayed(outcome)) => match record::decode(&outcome) {
            Ok(mut response) => {
                response.headers_mut().insert(
                    actix_web::http::header::HeaderName::from_static(IDEMPOTENT_REPLAYED),
                    HeaderValue::from_static("true"),
                );
                response
            }
            Err(e) => {
                tracing::error!(target: "idem", record = %call.record_id(), part = e.0, "recorded response cannot be decoded");
                problem_response(&Problem::replay_unreadable())
            }
        },
        Err(e) => problem_response(&Problem::for_error(&e)),
    };
    match waiting
        .take()
        .map(|req| req.into_parts().0)
        .or_else(|| after.take())
    {
        Some(req) => Ok(ServiceResponse::new(req, response)),
        None => Err(unbound(response)),
    }
}

/// Reads the request body, refusing it past `limit` bytes.
async fn read_body(mut payload: Payload, limit: usize) -> Result<Bytes, Problem> {
    let mut buf = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Problem::body_unreadable(&e))?;
        if buf.len() + chunk.len() > limit {
            return Err(Problem::too_large(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

fn answer(req: ServiceRequest, problem: &Problem) -> ServiceResponse<BoxBody> {
    req.into_response(problem_response(problem))
}

fn pass<B: MessageBody + 'static>(result: Result<ServiceResponse<B>, actix_web::Error>) -> Answer {
    result.map(ServiceResponse::map_into_boxed_body)
}

/// A response with no request left to answer it with (the handler
/// returned an error and kept its request): handed to actix-web as an
/// error that renders as exactly this response.
fn unbound(response: HttpResponse) -> actix_web::Error {
    InternalError::from_response("idem", response).into()
}
