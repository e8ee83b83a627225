//! `Idempotency`: the one builder of every adapter (the engine and the
//! [`Coverage`] it configures, with the same setters everywhere), and the
//! tower layer it is for adapters on tower.

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use idem_core::{Engine, IgnoredFields};

use crate::adapter_trait::{Adapter, ScopeFrom};
use crate::coverage::Coverage;
use crate::headers::IDEMPOTENCY_KEY;

/// Idempotency for the requests an adapter covers: the engine and the
/// [`Coverage`], with the same setters on every adapter (idem-axum's
/// `IdempotencyLayer`, idem-actix's `Idempotency`, idem-tonic's
/// `IdempotencyLayer`).
pub struct Idempotency<A: Adapter> {
    engine: Engine,
    coverage: Arc<Coverage<A>>,
}

impl<A: Adapter> Clone for Idempotency<A> {
    fn clone(&self) -> Self {
        Self {
            engine: self.engine.clone(),
            coverage: Arc::clone(&self.coverage),
        }
    }
}

impl<A: Adapter> fmt::Debug for Idempotency<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("engine", &self.engine)
            .field("coverage", &self.coverage)
            .finish()
    }
}

impl<A: Adapter> Idempotency<A> {
    /// Idempotency over `engine` with the adapter's defaults: its methods
    /// (`POST` and `PATCH` over HTTP, none over gRPC), the key in
    /// `Idempotency-Key` and required, one global scope, its body limits,
    /// and its record policy.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            coverage: Arc::new(Coverage {
                methods: A::default_methods(),
                key_header: HeaderName::from_static(IDEMPOTENCY_KEY),
                key_required: true,
                scope: A::global_scope(),
                max_request_body: A::default_limit(),
                ignored_fields: IgnoredFields::default(),
                max_response_body: A::default_limit(),
                record: A::Record::default(),
            }),
        }
    }

    fn coverage_mut(&mut self) -> &mut Coverage<A> {
        Arc::make_mut(&mut self.coverage)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What is covered, and how.
    pub fn coverage(&self) -> &Arc<Coverage<A>> {
        &self.coverage
    }

    /// The methods made idempotent, in place of the ones covered so far.
    #[must_use]
    pub fn methods(mut self, methods: impl IntoIterator<Item = A::Method>) -> Self {
        self.coverage_mut().methods = methods.into_iter().map(A::method).collect();
        self
    }

    /// One more method made idempotent (a gRPC method: its path,
    /// `/package.Service/Method`; the leading `/` may be left out).
    #[must_use]
    pub fn method(mut self, method: impl Into<A::Method>) -> Self {
        let method = A::method(method.into());
        self.coverage_mut().methods.push(method);
        self
    }

    /// The header (gRPC: metadata key) carrying the idempotency key
    /// (default `idempotency-key`).
    #[must_use]
    pub fn key_header(mut self, name: HeaderName) -> Self {
        self.coverage_mut().key_header = name;
        self
    }

    /// Whether a covered request without a key is refused (default `true`:
    /// 400, or `INVALID_ARGUMENT`) or passes through without protection
    /// (`false`).
    #[must_use]
    pub fn key_required(mut self, required: bool) -> Self {
        self.coverage_mut().key_required = required;
        self
    }

    /// How to find a request's scope: the principal, tenant or account
    /// whose keys these are. What the function gets and how it refuses a
    /// request is the adapter's (see its docs); a refused request is
    /// answered before anything runs.
    #[must_use]
    pub fn scope<F>(mut self, scope: F) -> Self
    where
        A: ScopeFrom<F>,
    {
        self.coverage_mut().scope = A::scope_fn(scope);
        self
    }

    /// The largest request body accepted, in bytes; a larger one is refused
    /// (413, or `RESOURCE_EXHAUSTED`) before anything runs.
    #[must_use]
    pub fn max_request_body(mut self, bytes: usize) -> Self {
        self.coverage_mut().max_request_body = bytes;
        self
    }

    /// Fields of a JSON request body that do not make a retry another
    /// request (a client's timestamp, a trace id): the fingerprint leaves
    /// them out, so a retry that changed only these is replayed rather
    /// than refused with 422. Bodies that are not JSON are compared byte
    /// for byte, as before. With idem-axum:
    /// `IdempotencyLayer::new(engine).ignore_body_fields(IgnoredFields::new(["/sent_at"])?)`.
    #[must_use]
    pub fn ignore_body_fields(mut self, fields: IgnoredFields) -> Self {
        self.coverage_mut().ignored_fields = fields;
        self
    }

    /// The largest response body recorded, in bytes; a larger one is
    /// served, and retries get `response-not-recorded` (the handler ran,
    /// so it does not run again).
    #[must_use]
    pub fn max_response_body(mut self, bytes: usize) -> Self {
        self.coverage_mut().max_response_body = bytes;
        self
    }

    /// Which answers are recorded (default: all but the ones that say the
    /// server failed: 5xx, or gRPC's transient codes).
    #[must_use]
    pub fn record(mut self, policy: A::Record) -> Self {
        self.coverage_mut().record = policy;
        self
    }
}

/// A tower adapter's service around the routes it covers.
pub trait TowerAdapter: Adapter {
    /// The service made around `S`.
    type Service<S>;
    /// Wraps `inner`.
    fn service<S>(idempotency: &Idempotency<Self>, inner: S) -> Self::Service<S>;
}

impl<A: TowerAdapter, S> tower_layer::Layer<S> for Idempotency<A> {
    type Service = A::Service<S>;

    fn layer(&self, inner: S) -> Self::Service {
        A::service(self, inner)
    }
}
