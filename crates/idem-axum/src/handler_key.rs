//! What an attribute's handler takes from the request besides its context:
//! a key that may be absent (`key_required = false`), and a scope named by
//! a header (`scope = header("x-api-key")`). Not a public API.

use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::HeaderMap;
use idem_core::{IdempotencyKey, Scope};

use crate::headers::key_from_headers;
use crate::problem::Problem;

/// The `Idempotency-Key` header of a handler with `key_required = false`:
/// a request without one runs without idempotency, as the layer's
/// `key_required(false)` lets it; a malformed one is still refused (400)
/// before the body is read.
#[derive(Debug)]
pub struct OptionalHeaderKey(Option<IdempotencyKey>);

impl<S: Send + Sync> FromRequestParts<S> for OptionalHeaderKey {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        key_from_headers(&parts.headers)
            .map(Self)
            .map_err(IntoResponse::into_response)
    }
}

impl OptionalHeaderKey {
    /// The key, if the request sent one.
    pub fn into_key(self) -> Result<Option<IdempotencyKey>, Problem> {
        Ok(self.0)
    }
}

/// The scope that header `name` names (see
/// [`idem_http::adapter::scope_from_values`]).
pub fn header_scope(headers: &HeaderMap, name: &str) -> Result<Scope, Problem> {
    idem_http::adapter::scope_from_values(
        name,
        headers
            .get_all(name)
            .iter()
            .map(http::HeaderValue::as_bytes),
    )
    .map_err(Problem::from)
}
