//! The engine's error type.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::ran::Ran;
use crate::store::StoreError;

/// Why [`Engine::run`](crate::Engine::run) or
/// [`Engine::execute`](crate::Engine::execute) did not return a result.
///
/// `E` is the operation's own error type; [`Engine::execute`](crate::Engine::execute)
/// uses `Error<Infallible>`, where [`Error::Failed`] cannot occur.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E = Infallible> {
    /// The operation failed: now (`Ran::Executed`), or earlier with a final
    /// failure that was recorded and is replayed (`Ran::Replayed`).
    Failed(Ran<E>),
    /// Another caller is running this request; retry after `retry_after`.
    InFlight {
        /// Time left on the running caller's lease.
        retry_after: Duration,
    },
    /// The key was already used for a different request.
    Mismatch,
    /// A late retry: the operation completed before, but its record has
    /// expired, so its result can no longer be answered; it is not run
    /// again (the record's trace, kept for the store's trace window, says
    /// the key was used). A new key runs it as a new operation.
    Expired,
    /// The operation finished after its claim was lost (the lease ran out and
    /// another caller may have taken over); its result was not recorded.
    LeaseLost,
    /// The store failed; the operation did not run.
    Store(StoreError),
    /// A result could not be encoded for recording, or a recorded one decoded.
    Codec(CodecError),
    /// The key given for the operation is not a valid idempotency key.
    InvalidKey(crate::KeyError),
    /// The operation's input could not be fingerprinted.
    Fingerprint(crate::FingerprintError),
    /// This process runs as much claimed work as it was allowed
    /// ([`Engine::with_max_in_flight`](crate::Engine::with_max_in_flight)):
    /// nothing was asked of the store and nothing ran; retry after
    /// `retry_after`.
    Overloaded {
        /// When to try again.
        retry_after: Duration,
    },
}

impl<E> Error<E> {
    /// Whether the same call may succeed later: a duplicate in flight, a
    /// store that is unreachable or full, or a record written by a newer
    /// version mid-rollout. A transient operation failure
    /// ([`Error::Failed`]) is for the operation's own type to say.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::InFlight { .. } | Error::Overloaded { .. } => true,
            Error::Store(e) => e.is_transient(),
            Error::Codec(e) => e.is_newer_format(),
            _ => false,
        }
    }

    /// How long to wait before retrying, when the error says.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::InFlight { retry_after } | Error::Overloaded { retry_after } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }
}

impl Error<Infallible> {
    /// Widens an error of [`Engine::execute`](crate::Engine::execute) to any
    /// operation error type.
    pub fn cast<E>(self) -> Error<E> {
        match self {
            Error::InFlight { retry_after } => Error::InFlight { retry_after },
            Error::Mismatch => Error::Mismatch,
            Error::Expired => Error::Expired,
            Error::LeaseLost => Error::LeaseLost,
            Error::Store(e) => Error::Store(e),
            Error::Codec(e) => Error::Codec(e),
            Error::InvalidKey(e) => Error::InvalidKey(e),
            Error::Fingerprint(e) => Error::Fingerprint(e),
            Error::Overloaded { retry_after } => Error::Overloaded { retry_after },
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Failed(Ran::Executed(e)) => write!(f, "the operation failed: {e}"),
            Error::Failed(Ran::Replayed(e)) => {
                write!(
                    f,
                    "the operation failed earlier and its recorded failure is replayed: {e}"
                )
            }
            Error::InFlight { retry_after } => write!(
                f,
                "a request with this idempotency key is still being processed; retry in {}ms",
                retry_after.as_millis()
            ),
            Error::Mismatch => f.write_str(
                "this idempotency key was already used for a different request; send a new key \
                 for a new request",
            ),
            Error::Expired => f.write_str(
                "a request with this idempotency key completed earlier, and its recorded result \
                 has expired, so it cannot be answered again; it is not run again: send a new \
                 key to run it as a new request",
            ),
            Error::LeaseLost => f.write_str(
                "the operation finished after its claim was lost (its lease ran out and it may \
                 have been taken over); its result was not recorded",
            ),
            Error::Store(e) => write!(
                f,
                "the idempotency store failed, so the operation did not run: {e}"
            ),
            Error::Codec(e) => e.fmt(f),
            Error::InvalidKey(e) => e.fmt(f),
            Error::Fingerprint(e) => e.fmt(f),
            Error::Overloaded { retry_after } => write!(
                f,
                "this server runs as many requests as it may at once; nothing ran: retry in {} ms",
                retry_after.as_millis()
            ),
        }
    }
}

impl<E: StdError + 'static> StdError for Error<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Failed(ran) => Some(ran.get()),
            Error::Store(e) => Some(e),
            Error::Codec(e) => Some(e),
            Error::InvalidKey(e) => Some(e),
            Error::Fingerprint(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<StoreError> for Error<E> {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

/// A result could not be encoded for the record, or a record decoded.
#[derive(Debug)]
pub struct CodecError {
    decoding: bool,
    newer: bool,
    source: serde_json::Error,
}

impl CodecError {
    pub(crate) fn encode(source: serde_json::Error) -> Self {
        Self {
            decoding: false,
            newer: false,
            source,
        }
    }

    pub(crate) fn decode(source: serde_json::Error) -> Self {
        Self {
            decoding: true,
            newer: false,
            source,
        }
    }

    /// A record written in `format`, newer than this version reads.
    pub(crate) fn newer_format(format: &str) -> Self {
        Self {
            decoding: true,
            newer: true,
            source: serde::de::Error::custom(format!(
                "it was written in record format {format} by a newer version of idem, and this \
                 version reads format 1: finish the rollout, and retry"
            )),
        }
    }

    /// Whether the record is not broken but newer: written by a newer
    /// version of idem in a format this one does not read.
    pub fn is_newer_format(&self) -> bool {
        self.newer
    }

    /// Whether a recorded result failed to decode (as opposed to a new one
    /// failing to encode).
    pub fn is_decode(&self) -> bool {
        self.decoding
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.decoding {
            write!(
                f,
                "the recorded result cannot be decoded into the operation's result type (was the \
                 type changed since it was recorded?): {}",
                self.source
            )
        } else {
            write!(
                f,
                "the operation's result cannot be encoded for recording: {}",
                self.source
            )
        }
    }
}

impl StdError for CodecError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.source)
    }
}
