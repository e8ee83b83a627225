//! `IdempotencyLayer`: idempotency for every covered route of a router, and
//! [`Axum`], the adapter it is built on.

use std::sync::Arc;

use http::request::Parts;
use http::{Method, StatusCode};
use idem_core::Scope;
use idem_http::adapter::{Adapter, ScopeFrom};
use idem_http::{Idempotency, RecordPolicy};

/// A tower [`Layer`](tower_layer::Layer) that makes the routes it wraps
/// idempotent: [`idem_http::Idempotency`] for axum, with the setters every
/// adapter shares.
///
/// For a request whose method is covered (default `POST` and `PATCH`), it reads
/// the `Idempotency-Key` header, derives the scope from the request, reads the
/// body (bounded), fingerprints method, route, path, query and body, and runs
/// the handler at most once per key, recording its response. Requests with
/// other methods pass through untouched.
///
/// Its defaults: `POST` and `PATCH` covered, the key required, one global
/// scope, request and response bodies bounded at 1 MiB, 5xx answers not
/// recorded. The scope function gets the request's head and refuses with a
/// status, answered with an empty body before anything runs.
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
pub type IdempotencyLayer = Idempotency<Axum>;

/// idem's adapter for axum: what [`IdempotencyLayer`] covers (HTTP
/// methods), how it reads a scope (from the request's head), and which
/// answers it records ([`RecordPolicy`]).
#[derive(Clone, Copy, Debug)]
pub struct Axum;

/// How a request's scope is read from its head.
pub(crate) type ScopeFn = dyn Fn(&Parts) -> Result<Scope, StatusCode> + Send + Sync;

impl Adapter for Axum {
    type Method = Method;
    type ScopeFn = ScopeFn;
    type Record = RecordPolicy;

    fn global_scope() -> Arc<ScopeFn> {
        Arc::new(|_| Ok(Scope::global()))
    }
}

impl<F> ScopeFrom<F> for Axum
where
    F: Fn(&Parts) -> Result<Scope, StatusCode> + Send + Sync + 'static,
{
    fn scope_fn(f: F) -> Arc<ScopeFn> {
        Arc::new(f)
    }
}
