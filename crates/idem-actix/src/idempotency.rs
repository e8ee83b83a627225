//! `Idempotency`: the middleware factory, and [`Actix`], the adapter it is
//! built on.

use std::future::{ready, Ready};
use std::rc::Rc;
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::{Method, StatusCode};
use idem_core::{Engine, Scope};
use idem_http::RecordPolicy;

use crate::adapter::Actix;
use crate::middleware::IdempotencyMiddleware;

/// Middleware that makes the routes it wraps idempotent, with the same rules
/// and answers as `idem_axum::IdempotencyLayer`.
///
/// For a request whose method is covered (default `POST` and `PATCH`), it
/// reads the `Idempotency-Key` header, derives the scope from the request,
/// reads the body (bounded), fingerprints method, route pattern, path, query
/// and body, and runs the handler at most once per key, recording its
/// response. Requests with other methods pass through untouched. Every answer
/// it gives on its own is `application/problem+json`.
///
/// A client that hangs up does not cancel a handler that holds a claim: the
/// rest of it runs on a task of the worker's own (`actix_web::rt::spawn`),
/// and its response is recorded for the retry.
///
/// ```no_run
/// use actix_web::{web, App, HttpServer};
/// use idem_actix::Idempotency;
/// use idem_core::{Engine, MemoryStore, Scope};
///
/// # async fn run() -> std::io::Result<()> {
/// let engine = Engine::new(MemoryStore::new());
/// let idempotency = Idempotency::new(engine).scope(|req| {
///     // keys are namespaced by the tenant
///     Ok(req
///         .headers()
///         .get("x-tenant")
///         .and_then(|v| v.to_str().ok())
///         .map_or_else(Scope::global, Scope::new))
/// });
/// HttpServer::new(move || {
///     App::new()
///         .wrap(idempotency.clone())
///         .route("/orders", web::post().to(|| async { "created" }))
/// })
/// .bind(("127.0.0.1", 8080))?
/// .run()
/// .await
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Idempotency(idem_http::Idempotency<Actix>);

/// The setters are [`idem_http::Idempotency`]'s, which every adapter shares;
/// the scope function gets the `ServiceRequest` and refuses with a status,
/// answered with an empty body before anything runs.
impl Idempotency {
    /// Middleware over `engine`: covers `POST` and `PATCH`, requires the
    /// key, uses one global scope, bounds request and response bodies at
    /// 1 MiB, and does not record 5xx answers.
    pub fn new(engine: Engine) -> Self {
        Self(idem_http::Idempotency::new(engine))
    }

    /// See [`idem_http::Idempotency::methods`].
    #[must_use]
    pub fn methods(self, methods: impl IntoIterator<Item = Method>) -> Self {
        Self(self.0.methods(methods))
    }

    /// See [`idem_http::Idempotency::method`].
    #[must_use]
    pub fn method(self, method: Method) -> Self {
        Self(self.0.method(method))
    }

    /// See [`idem_http::Idempotency::key_header`].
    #[must_use]
    pub fn key_header(self, name: http::HeaderName) -> Self {
        Self(self.0.key_header(name))
    }

    /// See [`idem_http::Idempotency::key_required`].
    #[must_use]
    pub fn key_required(self, required: bool) -> Self {
        Self(self.0.key_required(required))
    }

    /// See [`idem_http::Idempotency::scope`].
    #[must_use]
    pub fn scope<F>(self, scope: F) -> Self
    where
        F: Fn(&ServiceRequest) -> Result<Scope, StatusCode> + Send + Sync + 'static,
    {
        Self(self.0.scope(scope))
    }

    /// See [`idem_http::Idempotency::max_request_body`].
    #[must_use]
    pub fn max_request_body(self, bytes: usize) -> Self {
        Self(self.0.max_request_body(bytes))
    }

    /// See [`idem_http::Idempotency::ignore_body_fields`].
    #[must_use]
    pub fn ignore_body_fields(self, fields: idem_core::IgnoredFields) -> Self {
        Self(self.0.ignore_body_fields(fields))
    }

    /// See [`idem_http::Idempotency::max_response_body`].
    #[must_use]
    pub fn max_response_body(self, bytes: usize) -> Self {
        Self(self.0.max_response_body(bytes))
    }

    /// See [`idem_http::Idempotency::record`].
    #[must_use]
    pub fn record(self, policy: RecordPolicy) -> Self {
        Self(self.0.record(policy))
    }
}

impl<S, B> Transform<S, ServiceRequest> for Idempotency
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Transform = IdempotencyMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(IdempotencyMiddleware {
            service: Rc::new(service),
            engine: self.0.engine().clone(),
            coverage: Arc::clone(self.0.coverage()),
        }))
    }
}
