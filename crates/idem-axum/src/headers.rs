//! The headers idem reads and writes: the key, the replay mark, and the
//! content type that decides how a body is compared.

use http::{header, HeaderMap, HeaderName};
use idem_core::IdempotencyKey;

use crate::problem::{Problem, ProblemKind};

/// The request header carrying the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The response header marking a replay.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Reads the key from the headers: `Ok(None)` if absent.
pub(crate) fn key_from_headers(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Problem::new(
            ProblemKind::KeyMalformed,
            "the Idempotency-Key header was sent more than once; send it once per request",
        ));
    }
    IdempotencyKey::parse_bytes(value.as_bytes())
        .map(Some)
        .map_err(|e| Problem::new(ProblemKind::KeyMalformed, format!("{e}")))
}

pub(crate) fn key_missing() -> Problem {
    Problem::new(
        ProblemKind::KeyMissing,
        "this endpoint requires an Idempotency-Key header: send a unique value (a UUID, say) \
         with each new request and the same value when retrying it",
    )
}

/// Whether a content type is JSON (`application/json` or `*/*+json`).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| {
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
}
