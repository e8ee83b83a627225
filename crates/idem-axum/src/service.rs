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
use http::{header, Request};
use idem_core::{Call, Engine};
use tower_service::Service;

use crate::headers::{is_json, key_from_header};
use crate::layer::Axum;
use crate::problem::Problem;
use crate::respond;
use idem_http::{
    add_body, read_request_body, request_fingerprint, Coverage, Idempotency, TowerAdapter,
};

/// The service made by [`IdempotencyLayer`](crate::IdempotencyLayer).
#[derive(Clone)]
pub struct IdempotencyService<S> {
    pub(crate) inner: S,
    pub(crate) engine: Engine,
    pub(crate) coverage: Arc<Coverage<Axum>>,
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
    config: &Coverage<Axum>,
    req: Request<Body>,
) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    if !config.methods.contains(req.method()) {
        return pass(inner.call(req).await);
    }
    let key = match key_from_header(req.headers(), &config.key_header) {
        Ok(Some(key)) => key,
        Ok(None) if config.key_required => {
            let missing = idem_http::Problem::key_missing_from(config.key_header.as_str());
            return Problem::from(missing).into_response();
        }
        Ok(None) => return pass(inner.call(req).await),
        Err(problem) => return problem.into_response(),
    };
    let (parts, body) = req.into_parts();
    let scope = match (config.scope)(&parts) {
        Ok(scope) => scope,
        Err(status) => return status.into_response(),
    };
    let length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .map(http::HeaderValue::as_bytes);
    let bytes = match read_request_body(length, body, config.max_request_body).await {
        Ok(bytes) => bytes,
        Err(problem) => return Problem::from(problem).into_response(),
    };

    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let mut fp = request_fingerprint(
        "http",
        parts.method.as_str(),
        route,
        parts.uri.path(),
        parts.uri.query(),
    );
    add_body(&mut fp, "body", is_json(&parts.headers), &bytes);
    let call = Call::new(scope, key, fp.finish()).with_operation("http");
    respond::respond(engine, call, config.settings(), move |_claim| async move {
        pass(
            inner
                .call(Request::from_parts(parts, Body::from(bytes)))
                .await,
        )
    })
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
        IdempotencyService {
            inner,
            engine: idempotency.engine().clone(),
            coverage: Arc::clone(idempotency.coverage()),
        }
    }
}
