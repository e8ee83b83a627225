//! `Config`: what the middleware is configured with, shared by the factory
//! that builds it (`Idempotency`) and the service that reads it.

use std::sync::Arc;

use actix_web::dev::ServiceRequest;
use actix_web::http::{Method, StatusCode};
use idem_core::Scope;
use idem_http::Settings;

/// How a request's scope is read from it.
pub(crate) type ScopeFn = dyn Fn(&ServiceRequest) -> Result<Scope, StatusCode> + Send + Sync;

/// What the middleware is configured with.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) methods: Vec<Method>,
    pub(crate) key_required: bool,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) settings: Settings,
}
