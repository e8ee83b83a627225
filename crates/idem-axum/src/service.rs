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
use http::request::Parts;
use http::{header, Method, Request, StatusCode};
use idem_core::{Call, Engine, Scope};
use tower_service::Service;

use crate::headers::{is_json, key_from_headers, key_missing};
use crate::problem::Problem;
use crate::respond;
use idem_http::Settings;
use idem_http::{add_body, read_request_body, request_fingerprint};

/// How a request's scope is read from its head.
pub(crate) type ScopeFn = dyn Fn(&Parts) -> Result<Scope, StatusCode> + Send + Sync;

/// What the layer configures and its services read.
#[derive(Clone)]
pub(crate) struct LayerConfig {
    pub(crate) methods: Vec<Method>,
    pub(crate) key_required: bool,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) settings: Settings,
}

/// The service made by [`IdempotencyLayer`](crate::IdempotencyLayer).
#[derive(Clone)]
pub struct IdempotencyService<S> {
    pub(crate) inner: S,
    pub(crate) engine: Engine,
    pub(crate) config: Arc<LayerConfig>,
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
        let (engine, config) = (self.engine.clone(), Arc::clone(&self.config));
        Box::pin(async move { Ok(handle(inner, engine, &config, req).await) })
    }
}

async fn handle<S>(
    mut inner: S,
    engine: Engine,
    config: &LayerConfig,
    req: Request<Body>,
) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    if !config.methods.contains(req.method()) {
        return pass(inner.call(req).await);
    }
    let key = match key_from_headers(req.headers()) {
        Ok(Some(key)) => key,
        Ok(None) if config.key_required => return key_missing().into_response(),
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
    let bytes = match read_request_body(length, body, config.settings.max_request_body).await {
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
    respond::respond(engine, call, config.settings, move |_claim| async move {
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
