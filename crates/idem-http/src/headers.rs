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
    content_type
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| {
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
}
