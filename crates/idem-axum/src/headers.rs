//! The headers idem reads and writes: the key, the replay mark, and the
//! content type that decides how a body is compared.

use http::{header, HeaderMap, HeaderName};
use idem_core::IdempotencyKey;

use crate::problem::Problem;

/// The request header carrying the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static(idem_http::IDEMPOTENCY_KEY);

/// The response header marking a replay.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static(idem_http::IDEMPOTENT_REPLAYED);

/// Reads the key from the headers (the `Idempotency-Key` header): `Ok(None)`
/// if absent.
pub(crate) fn key_from_headers(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    key_from_header(headers, &IDEMPOTENCY_KEY)
}

/// Reads the key from the `name` header: `Ok(None)` if absent.
pub(crate) fn key_from_header(
    headers: &HeaderMap,
    name: &HeaderName,
) -> Result<Option<IdempotencyKey>, Problem> {
    idem_http::adapter::key_from_values(
        headers
            .get_all(name)
            .iter()
            .map(http::HeaderValue::as_bytes),
    )
    .map_err(|e| idem_http::Problem::key_malformed(&e).into())
}

pub(crate) fn key_missing() -> Problem {
    idem_http::Problem::key_missing().into()
}

/// Whether a content type is JSON (`application/json` or `*/*+json`).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    idem_http::adapter::is_json(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
}
