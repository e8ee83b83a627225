//! The headers idem reads and writes: the key, the replay mark, and the
//! content type that decides how a body is compared.

use std::fmt;

use idem_core::{IdempotencyKey, KeyError};

/// The request header carrying the key (lowercase, as HTTP/2 spells it).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The response header marking a replay.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// Why the `Idempotency-Key` header was refused (400 `key-malformed`).
#[derive(Debug)]
pub enum KeyHeaderError {
    /// Sent more than once.
    Repeated,
    /// Not a valid key.
    Malformed(KeyError),
}

impl fmt::Display for KeyHeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Repeated => f.write_str(
                "the Idempotency-Key header was sent more than once; send it once per request",
            ),
            Self::Malformed(e) => write!(f, "the Idempotency-Key header: {e}"),
        }
    }
}

impl std::error::Error for KeyHeaderError {}

/// Reads the key from the values of the `Idempotency-Key` header, in the
/// order received: `Ok(None)` if there is none.
pub fn key_from_values<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Option<IdempotencyKey>, KeyHeaderError> {
    let mut values = values.into_iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(KeyHeaderError::Repeated);
    }
    IdempotencyKey::parse_bytes(value)
        .map(Some)
        .map_err(KeyHeaderError::Malformed)
}

/// Whether a `Content-Type` is JSON (`application/json` or
/// `application/*+json`), so that the body is compared parsed.
pub fn is_json(content_type: Option<&str>) -> bool {
    // Compared in place, without lowering a copy: this runs on every
    // request with a body.
    let Some(media) = content_type.and_then(|v| v.split(';').next()) else {
        return false;
    };
    let media = media.trim().as_bytes();
    let (top, sub) = media.split_at(media.len().min(12));
    top.eq_ignore_ascii_case(b"application/")
        && (sub.eq_ignore_ascii_case(b"json")
            || sub.len() >= 5 && sub[sub.len() - 5..].eq_ignore_ascii_case(b"+json"))
}

#[cfg(test)]
mod tests {
    use super::is_json;

    #[test]
    fn json_media_types_are_told_apart_from_others_in_any_case() {
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "  application/json  ;q=1",
            "application/problem+json",
            "APPLICATION/VND.API+JSON",
            "application/+json",
        ] {
            assert!(is_json(Some(json)), "{json:?} is JSON");
        }
        for other in [
            "",
            "application",
            "application/",
            "application/jsonx",
            "application/json-patch",
            "application/x-www-form-urlencoded",
            "text/json",
            "text/plain+json",
            "application/json+xml",
            "appli/cation/json",
        ] {
            assert!(!is_json(Some(other)), "{other:?} is not JSON");
        }
        assert!(!is_json(None));
    }
}
