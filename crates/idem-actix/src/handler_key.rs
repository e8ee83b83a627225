//! What an attribute's handler takes from the request besides its context:
//! a key that may be absent (`key_required = false`), and a scope named by
//! a header (`scope = header("x-api-key")`). Not a public API.

use actix_web::dev::Payload;
use actix_web::http::header::HeaderValue;
use actix_web::{FromRequest, HttpRequest};
use idem_core::{IdempotencyKey, Scope};
use idem_http::Problem;

use crate::handler::header_key;

/// The `Idempotency-Key` header of a handler with `key_required = false`:
/// a request without one runs without idempotency; a malformed one is
/// still refused (400) before the body is read.
#[derive(Debug)]
pub struct OptionalHeaderKey(Option<IdempotencyKey>);

impl FromRequest for OptionalHeaderKey {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(header_key(req).map(Self))
    }
}

impl OptionalHeaderKey {
    /// The key, if the request sent one.
    pub fn into_key(self) -> Result<Option<IdempotencyKey>, Problem> {
        Ok(self.0)
    }
}

/// The scope that header `name` of `request` names (see
/// [`idem_http::adapter::scope_from_values`]).
pub fn header_scope(request: &HttpRequest, name: &str) -> Result<Scope, Problem> {
    idem_http::adapter::scope_from_values(
        name,
        request.headers().get_all(name).map(HeaderValue::as_bytes),
    )
}
