//! `StoreError`: what went wrong in a store, and of what kind.

use std::error::Error as StdError;
use std::fmt;

/// What went wrong in a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The caller's lease ended or was taken over; nothing was changed.
    LeaseLost,
    /// The store could not be reached or did not answer in time.
    Unavailable,
    /// The store is at its configured capacity and refuses new records.
    Full,
    /// The store returned data that idem cannot read.
    Corrupt,
    /// The store does not offer this operation.
    Unsupported,
    /// A [transaction](crate::StoreTransaction) found that what it read had
    /// changed before it could commit; nothing was applied, and running the
    /// transaction again (reading anew) may succeed.
    Conflict,
    /// The record was written by a newer version of idem, in a format this
    /// version cannot read: it is not misread, and nothing runs. Transient:
    /// mid-rollout, an instance of the newer version answers it.
    NewerFormat,
}

/// An error from a [`Store`](crate::Store). Stores fail closed: when this is returned from
/// `begin`, the operation does not run.
#[derive(Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl StoreError {
    /// The caller no longer holds the lease it presented.
    pub fn lease_lost() -> Self {
        Self {
            kind: StoreErrorKind::LeaseLost,
            message: "the lease was lost: it ran out or another holder took the record over; \
                      nothing was changed"
                .into(),
            source: None,
        }
    }

    /// The store cannot be reached; `what` says what was being attempted.
    pub fn unavailable(
        what: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self {
            kind: StoreErrorKind::Unavailable,
            message: what.into(),
            source: Some(source.into()),
        }
    }

    /// The store answered, but not in a way idem may act on (a change not
    /// yet replicated, say): transient, like an unreachable store; `why`
    /// says what happened.
    pub fn unavailable_because(why: impl Into<String>) -> Self {
        Self {
            kind: StoreErrorKind::Unavailable,
            message: why.into(),
            source: None,
        }
    }

    /// The store is full.
    pub fn full(max_bytes: usize) -> Self {
        Self {
            kind: StoreErrorKind::Full,
            message: format!(
                "the store holds its maximum of {max_bytes} bytes of records and may not evict \
                 any (its policy refuses, or all are in flight), so new operations are refused \
                 until records expire"
            ),
            source: None,
        }
    }

    /// The store is full for the reason `why` gives (which says what was
    /// refused and what to do).
    pub fn full_because(why: impl Into<String>) -> Self {
        Self {
            kind: StoreErrorKind::Full,
            message: why.into(),
            source: None,
        }
    }

    /// The store returned something unreadable.
    pub fn corrupt(what: impl Into<String>) -> Self {
        Self {
            kind: StoreErrorKind::Corrupt,
            message: what.into(),
            source: None,
        }
    }

    /// The store does not offer `operation`.
    pub fn unsupported(operation: &str) -> Self {
        Self {
            kind: StoreErrorKind::Unsupported,
            message: format!("this store does not offer `{operation}`"),
            source: None,
        }
    }

    /// What a [transaction](crate::StoreTransaction) read changed before it
    /// could commit; `what` names it. Nothing was applied.
    pub fn conflict(what: impl Into<String>) -> Self {
        Self {
            kind: StoreErrorKind::Conflict,
            message: format!(
                "{}: it changed after the transaction read it, so nothing was applied; read \
                 it again and retry",
                what.into()
            ),
            source: None,
        }
    }

    /// The store does not offer what was asked, for the reason `message`
    /// gives (which says what to do instead).
    pub fn unsupported_because(message: impl Into<String>) -> Self {
        Self {
            kind: StoreErrorKind::Unsupported,
            message: message.into(),
            source: None,
        }
    }

    /// The record `what` names was written by a newer version of idem, in
    /// record format `format`, which this version (format `reads`) cannot
    /// read.
    pub fn newer_format(what: &str, format: impl fmt::Display, reads: impl fmt::Display) -> Self {
        Self {
            kind: StoreErrorKind::NewerFormat,
            message: format!(
                "{what} was written by a newer version of idem (record format {format}; this \
                 version reads format {reads}), so it is not read and nothing runs: finish the \
                 rollout, and retry"
            ),
            source: None,
        }
    }

    /// Refuses a record in `format` when it is newer than `reads`, the
    /// format this version reads ([`newer_format`](Self::newer_format));
    /// `what` names the record.
    pub fn refuse_newer_format(what: &str, format: i16, reads: i16) -> Result<(), Self> {
        if format > reads {
            return Err(Self::newer_format(what, format, reads));
        }
        Ok(())
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the same call may succeed later (the store was unreachable
    /// or full, or the record is from a newer version mid-rollout).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            StoreErrorKind::Unavailable | StoreErrorKind::Full | StoreErrorKind::NewerFormat
        )
    }

    /// Whether a transaction found what it read changed (run it again).
    pub fn is_conflict(&self) -> bool {
        self.kind == StoreErrorKind::Conflict
    }

    /// Whether this is a lost lease.
    pub fn is_lease_lost(&self) -> bool {
        self.kind == StoreErrorKind::LeaseLost
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}
