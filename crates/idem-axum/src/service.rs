//! The service that `IdempotencyLayer` wraps around a route.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, Request};
use idem_core::Engine;
use tower_service::Service;

use crate::layer::Axum;
use crate::problem::Problem;
use crate::respond;
use idem_http::adapter::{read_call, Coverage, KeyDecision, RequestLine, TowerAdapter};
use idem_http::Idempotency;

/// The service made by [`IdempotencyLayer`](crate::IdempotencyLayer).
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    engine: Engine,
    coverage: Arc<Coverage<Axum>>,
}

impl<S> IdempotencyService<S> {
    /// `inner` behind `idempotency`'s engine and coverage (what the
    /// layer's `layer` makes).
    pub fn new(idempotency: &Idempotency<Axum>, inner: S) -> Self {
        Self {
            inner,
            engine: idempotency.engine().clone(),
            coverage: Arc::clone(idempotency.coverage()),
        }
    }
}

impl<S> fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyService").finish_non_exhaustive()
    }
}

impl<S> Service<Request<Body>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // The clone is not known to be ready; the original, which was polled
        // ready, serves this request.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (engine, coverage) = (self.engine.clone(), Arc::clone(&self.coverage));
        Box::pin(async move { Ok(handle(inner, engine, &coverage, req).await) })
    }
}

async fn handle<S>(
    mut inner: S,
    engine: Engine,
    coverage: &Coverage<Axum>,
    req: Request<Body>,
) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    if !coverage.methods.contains(req.method()) {
        return pass(inner.call(req).await);
    }
    let values = req.headers().get_all(&coverage.key_header);
    let key = match coverage.key_decision(values.iter().map(HeaderValue::as_bytes)) {
        KeyDecision::Key(key) => key,
        KeyDecision::PassThrough => return pass(inner.call(req).await),
        KeyDecision::Refuse(problem) => return Problem::from(problem).into_response(),
    };
    let (parts, body) = req.into_parts();
    let scope = match (coverage.scope)(&parts) {
        Ok(scope) => scope,
        Err(status) => return status.into_response(),
    };
    let line = RequestLine {
        method: parts.method.as_str(),
        route: parts
            .extensions
            .get::<MatchedPath>()
            .map(MatchedPath::as_str),
        path: parts.uri.path(),
        query: parts.uri.query(),
        content_type: parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        content_length: parts
            .headers
            .get(header::CONTENT_LENGTH)
            .map(HeaderValue::as_bytes),
    };
    let (call, bytes) = match read_call(
        line,
        scope,
        key,
        body,
        coverage.max_request_body,
        &coverage.ignored_fields,
    )
    .await
    {
        Ok(read) => read,
        Err(problem) => return Problem::from(problem).into_response(),
    };
    respond::respond(
        engine,
        call,
        coverage.settings(),
        move |_claim| async move {
            pass(
                inner
                    .call(Request::from_parts(parts, Body::from(bytes)))
                    .await,
            )
        },
    )
    .await
}

fn pass(result: Result<Response, Infallible>) -> Response {
    match result {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

impl TowerAdapter for Axum {
    type Service<S> = IdempotencyService<S>;

    fn service<S>(idempotency: &Idempotency<Self>, inner: S) -> IdempotencyService<S> {
        IdempotencyService::new(idempotency, inner)
    }
}
