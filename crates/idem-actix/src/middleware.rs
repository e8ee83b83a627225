//! `IdempotencyMiddleware`: the service `Idempotency` wraps around the
//! routes, and what it does with each request.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, Service, ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpMessage as _, HttpRequest, HttpResponse};
use futures_util::future::LocalBoxFuture;
use idem_core::Engine;
use idem_http::adapter::{read_call, Coverage, KeyDecision, RequestLine};
use idem_http::Problem;

use crate::adapter::Actix;
use crate::body::payload_body;
use crate::problem::problem_response;
use crate::respond::respond;

/// The service made by [`Idempotency`](crate::Idempotency).
pub struct IdempotencyMiddleware<S> {
    pub(crate) service: Rc<S>,
    pub(crate) engine: Engine,
    pub(crate) coverage: Arc<Coverage<Actix>>,
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
            Arc::clone(&self.coverage),
            req,
        ))
    }
}

async fn handle<S, B>(
    service: Rc<S>,
    engine: Engine,
    coverage: Arc<Coverage<Actix>>,
    mut req: ServiceRequest,
) -> Answer
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    if !coverage.methods.contains(req.method()) {
        return pass(service.call(req).await);
    }
    let values = req.headers().get_all(coverage.key_header.as_str());
    let key = match coverage.key_decision(values.map(HeaderValue::as_bytes)) {
        KeyDecision::Key(key) => key,
        KeyDecision::PassThrough => return pass(service.call(req).await),
        KeyDecision::Refuse(problem) => return Ok(answer(req, &problem)),
    };
    let scope = match (coverage.scope)(&req) {
        Ok(scope) => scope,
        Err(status) => return Ok(req.into_response(HttpResponse::new(status))),
    };
    let payload = req.take_payload();
    let route = req.match_pattern();
    let line = RequestLine {
        method: req.method().as_str(),
        route: route.as_deref(),
        path: req.path(),
        query: Some(req.query_string()),
        content_type: req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        content_length: req.headers().get(CONTENT_LENGTH).map(HeaderValue::as_bytes),
    };
    let read = read_call(
        line,
        scope,
        key,
        payload_body(payload),
        coverage.max_request_body,
        &coverage.ignored_fields,
    )
    .await;
    let (call, bytes) = match read {
        Ok(read) => read,
        Err(problem) => return Ok(answer(req, &problem)),
    };
    req.set_payload(Payload::from(bytes));

    // The request waits here until the handler takes it; the handler's
    // request comes back through `after`. The answer needs one of them.
    let waiting = Rc::new(Cell::new(Some(req)));
    let after: Rc<Cell<Option<HttpRequest>>> = Rc::new(Cell::new(None));
    let (waiting_op, after_op) = (Rc::clone(&waiting), Rc::clone(&after));
    let answer = respond(
        engine,
        call,
        coverage.settings(),
        move |_claim| async move {
            let Some(req) = waiting_op.take() else {
                return Ok(problem_response(&Problem::handler_failed()));
            };
            let res = service.call(req).await?;
            let (req, response) = res.into_parts();
            after_op.set(Some(req));
            Ok(response.map_into_boxed_body())
        },
    )
    .await?;
    match waiting
        .take()
        .map(|req| req.into_parts().0)
        .or_else(|| after.take())
    {
        Some(req) => Ok(ServiceResponse::new(req, answer)),
        None => Err(unbound(answer)),
    }
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
