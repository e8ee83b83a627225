//! [`Actix`]: idem's adapter for actix-web, as the one builder
//! ([`idem_http::Idempotency`]) sees it.

use std::sync::Arc;

use actix_web::dev::ServiceRequest;
use actix_web::http::{Method, StatusCode};
use idem_core::Scope;
use idem_http::adapter::{Adapter, ScopeFrom};
use idem_http::RecordPolicy;

/// How a request's scope is read from it.
pub(crate) type ScopeFn = dyn Fn(&ServiceRequest) -> Result<Scope, StatusCode> + Send + Sync;

/// idem's adapter for actix-web: what [`Idempotency`](crate::Idempotency) covers (HTTP methods),
/// how it reads a scope (from the `ServiceRequest`), and which answers it
/// records ([`RecordPolicy`]).
#[derive(Clone, Copy, Debug)]
pub struct Actix;

impl Adapter for Actix {
    type Method = Method;
    type ScopeFn = ScopeFn;
    type Record = RecordPolicy;

    fn global_scope() -> Arc<ScopeFn> {
        Arc::new(|_| Ok(Scope::global()))
    }
}

impl<F> ScopeFrom<F> for Actix
where
    F: Fn(&ServiceRequest) -> Result<Scope, StatusCode> + Send + Sync + 'static,
{
    fn scope_fn(f: F) -> Arc<ScopeFn> {
        Arc::new(f)
    }
}
