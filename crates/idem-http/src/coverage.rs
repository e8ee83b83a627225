//! `Idempotency`: the one builder of every adapter, and `Coverage`, what it
//! configures: which requests are covered, where their key is, how their
//! scope is read, and the bounds and record policy that apply to them.

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use idem_core::Engine;

use crate::covered_request::{decide_key, KeyDecision};
use crate::headers::IDEMPOTENCY_KEY;
use crate::problem::Problem;
use crate::record_policy::RecordPolicy;
use crate::settings::Settings;

/// A framework adapter's vocabulary for [`Idempotency`]: what names a
/// covered operation, how a scope is read, and which answers are recorded.
/// Each adapter implements it once, on a marker type (`idem_axum::Axum`).
pub trait Adapter: Sized + 'static {
    /// What names a covered operation: an HTTP method, a gRPC method path.
    type Method: Clone + fmt::Debug + PartialEq + Send + Sync + std::str::FromStr;
    /// How a request's scope is read (a `dyn Fn` of the framework's
    /// request).
    type ScopeFn: ?Sized + Send + Sync;
    /// Which answers are recorded.
    type Record: Copy + fmt::Debug + Default + Send + Sync;
    /// The scope of every request until told otherwise: one global scope.
    fn global_scope() -> Arc<Self::ScopeFn>;
    /// The methods covered until told otherwise: `POST` and `PATCH`, the
    /// HTTP methods that are not idempotent by their definition.
    fn default_methods() -> Vec<Self::Method> {
        ["POST", "PATCH"]
            .into_iter()
            .filter_map(|m| m.parse().ok())
            .collect()
    }
    /// The request and recorded response limit until told otherwise
    /// (1 MiB).
    fn default_limit() -> usize {
        1 << 20
    }
    /// A method as named by the user, as the adapter compares it (by
    /// default unchanged).
    fn method(method: Self::Method) -> Self::Method {
        method
    }
    /// The problem for a covered request without a key where one is
    /// required, the key expected in `header` (by default HTTP's words).
    fn key_missing(header: &str) -> Problem {
        Problem::key_missing_from(header)
    }
}

/// How a user's scope function becomes the adapter's ([`Idempotency::scope`]).
pub trait ScopeFrom<F>: Adapter {
    /// `f`, as the adapter calls it.
    fn scope_fn(f: F) -> Arc<Self::ScopeFn>;
}

/// What an adapter covers and how (see [`Idempotency`]'s setters).
#[non_exhaustive]
pub struct Coverage<A: Adapter> {
    /// The covered methods.
    pub methods: Vec<A::Method>,
    /// The header (or gRPC metadata) that carries the key.
    pub key_header: HeaderName,
    /// Whether a covered request without a key is refused.
    pub key_required: bool,
    /// How a request's scope is read.
    pub scope: Arc<A::ScopeFn>,
    /// The largest request body accepted, in bytes.
    pub max_request_body: usize,
    /// The largest response body recorded, in bytes.
    pub max_response_body: usize,
    /// Which answers are recorded.
    pub record: A::Record,
}

impl<A: Adapter> Clone for Coverage<A> {
    fn clone(&self) -> Self {
        Self {
            methods: self.methods.clone(),
            key_header: self.key_header.clone(),
            key_required: self.key_required,
            scope: Arc::clone(&self.scope),
            max_request_body: self.max_request_body,
            max_response_body: self.max_response_body,
            record: self.record,
        }
    }
}

impl<A: Adapter> Coverage<A> {
    /// Whether requests for `method` are covered.
    pub fn covers<M: ?Sized>(&self, method: &M) -> bool
    where
        A::Method: PartialEq<M>,
    {
        self.methods.iter().any(|m| m == method)
    }

    /// What a covered request's key says to do, from the values of the key
    /// header (or metadata) in the order received: run it under its key,
    /// pass it through (no key, and keys are optional), or refuse it.
    pub fn key_decision<'a>(&self, values: impl IntoIterator<Item = &'a [u8]>) -> KeyDecision {
        decide_key(values, self.key_required, || {
            A::key_missing(self.key_header.as_str())
        })
    }
}

impl<A: Adapter<Record = RecordPolicy>> Coverage<A> {
    /// The bounds and record policy of an HTTP adapter's covered routes.
    pub fn settings(&self) -> Settings {
        Settings {
            max_request_body: self.max_request_body,
            max_response_body: self.max_response_body,
            record: self.record,
        }
    }
}

impl<A: Adapter> fmt::Debug for Coverage<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coverage")
            .field("methods", &self.methods)
            .field("key_header", &self.key_header)
            .field("key_required", &self.key_required)
            .field("max_request_body", &self.max_request_body)
            .field("max_response_body", &self.max_response_body)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

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
