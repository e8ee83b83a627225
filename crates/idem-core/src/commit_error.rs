//! `CommitError`: why [`Claim::commit`](crate::Claim::commit) did not
//! commit, and what became of the effects.

use crate::store::StoreError;

/// Why [`Claim::commit`](crate::Claim::commit) did not commit, and what became of the effects.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The claim was lost before the commit (its lease ran out and another
    /// attempt took the record over, or an operator force-removed it): the
    /// transaction was rolled back, none of its effects happened, and the
    /// key belongs to the other attempt. Answer that, and do nothing else.
    #[error("the claim was lost before the commit; the transaction was rolled back and none of its effects happened")]
    LeaseLost,
    /// What the transaction read changed before it could commit (an
    /// optimistic store: Redis, memory): nothing was applied and the claim
    /// is still held. Read again, recompute, and commit a new transaction.
    #[error("{0}")]
    Conflict(#[source] StoreError),
    /// The record could not be written in the transaction (the database
    /// failed), or the store refused the transaction before applying
    /// anything (a Redis Cluster key outside the record's slot): none of
    /// its effects happened, and the claim is released so that a retry runs
    /// again. The error says what to change.
    #[error("the outcome could not be recorded in the transaction, which was rolled back: {0}")]
    RolledBack(#[source] StoreError),
    /// The commit was sent but its answer did not come (the connection
    /// failed, a timeout): the effects and the record either both happened
    /// or neither did, and nobody knows which yet. The claim is kept until
    /// its lease ends; a retry after that replays the outcome if it
    /// committed, or runs again if not.
    #[error("whether the transaction committed is unknown: {0}")]
    Uncertain(#[source] StoreError),
}

impl CommitError {
    /// Whether running the transaction again (reading anew) may succeed.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }
}
