//! `IdempotencyLayer`: idempotency for every covered route of a router.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::{Method, StatusCode};
use idem_core::{Engine, Scope};
use tower_layer::Layer;

use crate::service::{IdempotencyService, LayerConfig};
use idem_http::{RecordPolicy, Settings};

/// A tower [`Layer`] that makes the routes it wraps idempotent.
///
/// For a request whose method is covered (default `POST` and `PATCH`), it reads
/// the `Idempotency-Key` header, derives the scope from the request, reads the
/// body (bounded), fingerprints method, route, path, query and body, and runs
/// the handler at most once per key, recording its response. Requests with
/// other methods pass through untouched.
///
/// ```no_run
/// use axum::{routing::post, Router};
/// use idem_axum::IdempotencyLayer;
/// use idem_core::{Engine, MemoryStore, Scope};
///
/// #[derive(Clone)]
/// struct Principal(String);
///
/// let engine = Engine::new(MemoryStore::new());
/// let app: Router = Router::new()
///     .route("/orders", post(|| async { "created" }))
///     .layer(
///         IdempotencyLayer::new(engine)
///             // keys are namespaced by the authenticated principal, which an
///             // authentication layer put in the request extensions
///             .scope(|parts| {
///                 parts
///                     .extensions
///                     .get::<Principal>()
///                     .map(|p| Scope::new(p.0.clone()))
///                     .ok_or(http::StatusCode::UNAUTHORIZED)
///             }),
///     );
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    pub(crate) engine: Engine,
    pub(crate) config: Arc<LayerConfig>,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("engine", &self.engine)
            .field("methods", &self.config.methods)
            .field("key_required", &self.config.key_required)
            .field("settings", &self.config.settings)
            .finish_non_exhaustive()
    }
}

impl IdempotencyLayer {
    /// A layer over `engine`: covers `POST` and `PATCH`, requires the key,
    /// uses one global scope, bounds request and response bodies at 1 MiB,
    /// and does not record 5xx answers.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            config: Arc::new(LayerConfig {
                methods: vec![Method::POST, Method::PATCH],
                key_required: true,
                scope: Arc::new(|_| Ok(Scope::global())),
                settings: Settings::default(),
            }),
        }
    }

    fn config_mut(&mut self) -> &mut LayerConfig {
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

    /// How to find a request's scope (the principal or tenant whose keys these
    /// are). On `Err(status)` the client gets that status (with an empty body)
    /// before anything runs.
    #[must_use]
    pub fn scope<F>(mut self, scope: F) -> Self
    where
        F: Fn(&Parts) -> Result<Scope, StatusCode> + Send + Sync + 'static,
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

    /// The largest response body recorded, in bytes (default 1 MiB); a larger
    /// one is served, and retries get `response-not-recorded` (the handler
    /// ran, so it does not run again).
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

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            engine: self.engine.clone(),
            config: Arc::clone(&self.config),
        }
    }
}
