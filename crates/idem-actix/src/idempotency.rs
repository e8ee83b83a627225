//! `Idempotency`: the middleware factory, and what it is configured with.

use std::fmt;
use std::future::{ready, Ready};
use std::rc::Rc;
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::{Method, StatusCode};
use idem_core::{Engine, Scope};
use idem_http::{RecordPolicy, Settings};

use crate::config::Config;
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
#[derive(Clone)]
pub struct Idempotency {
    engine: Engine,
    config: Arc<Config>,
}

impl fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("engine", &self.engine)
            .field("methods", &self.config.methods)
            .field("key_required", &self.config.key_required)
            .field("settings", &self.config.settings)
            .finish_non_exhaustive()
    }
}

impl Idempotency {
    /// Middleware over `engine`: covers `POST` and `PATCH`, requires the key,
    /// uses one global scope, bounds request and response bodies at 1 MiB,
    /// and does not record 5xx answers.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            config: Arc::new(Config {
                methods: vec![Method::POST, Method::PATCH],
                key_required: true,
                scope: Arc::new(|_| Ok(Scope::global())),
                settings: Settings::default(),
            }),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// The methods made idempotent (default `POST`, `PATCH`).
    #[must_use]
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config_mut().methods = methods.into_iter().collect();
        self
    }

    /// Whether a covered request without a key is refused with 400 (default
    /// `true`) or passes through without protection (`false`).
    #[must_use]
    pub fn key_required(mut self, required: bool) -> Self {
        self.config_mut().key_required = required;
        self
    }

    /// How to find a request's scope (the principal or tenant whose keys
    /// these are). On `Err(status)` the client gets that status (with an
    /// empty body) before anything runs.
    #[must_use]
    pub fn scope<F>(mut self, scope: F) -> Self
    where
        F: Fn(&ServiceRequest) -> Result<Scope, StatusCode> + Send + Sync + 'static,
    {
        self.config_mut().scope = Arc::new(scope);
        self
    }

    /// The largest request body accepted, in bytes (default 1 MiB); a larger
    /// one gets 413 before anything runs.
    #[must_use]
    pub fn max_request_body(mut self, bytes: usize) -> Self {
        self.config_mut().settings.max_request_body = bytes;
        self
    }

    /// The largest response body recorded, in bytes (default 1 MiB); a
    /// larger one is served, and retries get `response-not-recorded`.
    #[must_use]
    pub fn max_response_body(mut self, bytes: usize) -> Self {
        self.config_mut().settings.max_response_body = bytes;
        self
    }

    /// Which answers are recorded (default: all but 5xx).
    #[must_use]
    pub fn record(mut self, policy: RecordPolicy) -> Self {
        self.config_mut().settings.record = policy;
        self
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
            engine: self.engine.clone(),
            config: Arc::clone(&self.config),
        }))
    }
}
