//! How [`Engine::run`](crate::Engine::run) records a `Result<T, E>`: as JSON,
//! `{"ok": T}` or `{"err": E}`.
//!
//! That is record format 1, told by its first byte, `{`. A later format
//! starts with `IDE` and its number, so that this version, meeting one,
//! says so ([`CodecError::is_newer_format`]) instead of misreading it; a
//! later version keeps reading format 1.
//!
//! The codec is built from two halves, one per type, each made where its
//! type is known to be serializable. The attribute's generated code makes
//! each half on the type the user wrote, so that a type that cannot be
//! recorded is reported once, there, and nowhere else.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use crate::error::CodecError;
use crate::failure::Failure;
use crate::store::Outcome;

/// The record's shape: an externally tagged enum.
#[derive(Serialize, Deserialize)]
enum Recorded<T, E> {
    #[serde(rename = "ok")]
    Ok(T),
    #[serde(rename = "err")]
    Err(E),
}

/// Encodes a result the way [`Engine::run`](crate::Engine::run) records it.
/// Store adapters that complete a record inside a transaction use this so
/// that replays decode.
pub fn encode_result<T: Serialize, E: Serialize>(
    result: &Result<T, E>,
) -> Result<Outcome, CodecError> {
    let recorded: Recorded<&T, &E> = match result {
        Ok(t) => Recorded::Ok(t),
        Err(e) => Recorded::Err(e),
    };
    to_outcome(&recorded)
}

fn to_outcome<R: Serialize>(recorded: &R) -> Result<Outcome, CodecError> {
    serde_json::to_vec(recorded)
        .map(Outcome::new)
        .map_err(CodecError::encode)
}

/// The success half: records and reads back a `T`.
pub struct OkCodec<T> {
    encode: fn(&T) -> Result<Outcome, CodecError>,
    decode: fn(&Outcome) -> Result<Option<T>, CodecError>,
}

impl<T: Serialize + DeserializeOwned> OkCodec<T> {
    /// The codec of `T`.
    pub fn new() -> Self {
        Self {
            encode: |t| to_outcome(&Recorded::<&T, ()>::Ok(t)),
            decode: |outcome| match serde_json::from_slice::<Recorded<T, IgnoredAny>>(
                outcome.as_bytes(),
            ) {
                Ok(Recorded::Ok(t)) => Ok(Some(t)),
                Ok(Recorded::Err(_)) => Ok(None),
                Err(e) => Err(CodecError::decode(e)),
            },
        }
    }
}

impl<T: Serialize + DeserializeOwned> Default for OkCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The failure half: records and reads back an `E`, and says which failures
/// are final.
pub struct ErrCodec<E> {
    encode: fn(&E) -> Result<Outcome, CodecError>,
    decode: fn(&Outcome) -> Result<E, CodecError>,
    is_final: fn(&E) -> bool,
}

impl<E: Serialize + DeserializeOwned + Failure> ErrCodec<E> {
    /// The codec of `E`.
    pub fn new() -> Self {
        Self {
            encode: |e| to_outcome(&Recorded::<(), &E>::Err(e)),
            decode: |outcome| match serde_json::from_slice::<Recorded<IgnoredAny, E>>(
                outcome.as_bytes(),
            ) {
                Ok(Recorded::Err(e)) => Ok(e),
                Ok(Recorded::Ok(_)) => Err(CodecError::decode(serde::de::Error::custom(
                    "a recorded success read back as a failure",
                ))),
                Err(e) => Err(CodecError::decode(e)),
            },
            is_final: E::is_final,
        }
    }
}

impl<E: Serialize + DeserializeOwned + Failure> Default for ErrCodec<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Both halves.
pub(crate) struct ResultCodec<T, E> {
    pub(crate) ok: OkCodec<T>,
    pub(crate) err: ErrCodec<E>,
}

impl<T, E> ResultCodec<T, E>
where
    T: Serialize + DeserializeOwned,
    E: Serialize + DeserializeOwned + Failure,
{
    /// The codec of serde types, as [`Engine::run`](crate::Engine::run)
    /// records them.
    pub(crate) fn serde() -> Self {
        Self {
            ok: OkCodec::new(),
            err: ErrCodec::new(),
        }
    }
}

impl<T, E> ResultCodec<T, E> {
    /// Whether `result` is recorded (a success or a final failure) or
    /// releases the claim (a transient failure).
    pub(crate) fn is_recorded(&self, result: &Result<T, E>) -> bool {
        match result {
            Ok(_) => true,
            Err(e) => (self.err.is_final)(e),
        }
    }

    pub(crate) fn encode(&self, result: &Result<T, E>) -> Result<Outcome, CodecError> {
        match result {
            Ok(t) => (self.ok.encode)(t),
            Err(e) => (self.err.encode)(e),
        }
    }

    pub(crate) fn decode(&self, outcome: &Outcome) -> Result<Result<T, E>, CodecError> {
        if let [b'I', b'D', b'E', n, ..] = outcome.as_bytes() {
            return Err(CodecError::newer_format(&char::from(*n).to_string()));
        }
        match (self.ok.decode)(outcome)? {
            Some(t) => Ok(Ok(t)),
            None => (self.err.decode)(outcome).map(Err),
        }
    }
}
