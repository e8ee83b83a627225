//! How the store stories' debits fail: the claim lost, a commit whose
//! outcome is unknown, or the database's own error.

use idem_core::{CommitError, Failure};
use serde::{Deserialize, Serialize};

/// A debit that did not land, as the store stories record it.
#[derive(Debug, Serialize, Deserialize)]
pub enum DebitError {
    /// The claim was lost before the debit committed: nothing landed.
    LeaseLost,
    /// The commit's outcome is unknown.
    Uncertain,
    /// The database refused a statement.
    Database(String),
}

impl Failure for DebitError {
    fn is_final(&self) -> bool {
        false
    }
}

impl From<CommitError> for DebitError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LeaseLost => Self::LeaseLost,
            _ => Self::Uncertain,
        }
    }
}
