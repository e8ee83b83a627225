//! Committing an operation's effects with its record: [`Claim::commit`].

use crate::claim::{Claim, Settled};
use crate::decision::Decision;
use crate::store::{Outcome, StoreError, StoreErrorKind};
use crate::transaction::StoreTransaction;

/// Why [`Claim::commit`] did not commit, and what became of the effects.
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
    NotRecorded(#[source] StoreError),
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

impl Claim {
    /// Records `outcome` in `tx`, the operation's own open transaction of its
    /// store, and commits: the operation's writes in `tx` and its record
    /// take effect together, and only while this claim holds. A holder that
    /// lost its claim (it stalled past its lease and another attempt took
    /// over, or the record was force-removed) has its transaction rolled
    /// back: its effects never happen, and only the attempt that holds the
    /// claim takes effect.
    ///
    /// The engine learns the result from the claim: after `Ok`, it records
    /// nothing more and returns what the operation returns; after an error,
    /// it keeps or releases the claim as [`CommitError`] says. Call it once,
    /// last, and return.
    ///
    /// What holds the claim at the commit differs by store, and so does what
    /// happens to a holder stalled in the middle: PostgreSQL locks the
    /// record's row from the completion to the commit (a takeover waits);
    /// Redis and memory check the claim and what the transaction read, then
    /// apply its writes and the record in one atomic step
    /// ([`CommitError::Conflict`] if what it read changed).
    pub async fn commit<T: StoreTransaction>(
        &self,
        mut tx: T,
        outcome: &Outcome,
    ) -> Result<(), CommitError> {
        if let Err(e) = tx.complete(self, outcome).await {
            rollback(tx, self).await;
            return Err(self.failed(e, false));
        }
        match tx.commit().await {
            Ok(()) => {
                self.settle(Settled::Recorded);
                Ok(())
            }
            Err(e) => Err(self.failed(e, true)),
        }
    }

    /// Rolls `tx` back: none of the operation's writes happen, and the
    /// engine releases the claim so that a retry runs again (an answer the
    /// policy does not record, a 5xx say). Only for an operation whose every
    /// effect was in `tx`.
    pub async fn roll_back<T: StoreTransaction>(&self, tx: T) {
        rollback(tx, self).await;
        self.give_up();
    }

    /// Tells the engine that none of the operation's effects happened (its
    /// transaction was rolled back, or its commit conflicted and it will not
    /// try again): the claim is released when the operation returns, so
    /// that a retry runs again, whatever the operation returns.
    pub fn give_up(&self) {
        self.settle(Settled::Released);
    }

    fn failed(&self, e: StoreError, committing: bool) -> CommitError {
        if e.is_lease_lost() {
            tracing::warn!(target: "idem", record = %self.record_id(), token = self.fencing_token().0, decision = Decision::LeaseLost.as_str(), "the claim was lost before the commit; the transaction was rolled back");
            self.settle(Settled::Kept);
            CommitError::LeaseLost
        } else if e.is_conflict() {
            CommitError::Conflict(e)
        } else if committing && e.kind() != StoreErrorKind::Unsupported {
            tracing::error!(target: "idem", record = %self.record_id(), error = %e, decision = Decision::CommitUncertain.as_str(), "whether the transaction with the record committed is unknown; the claim is kept until its lease ends");
            self.settle(Settled::Kept);
            CommitError::Uncertain(e)
        } else {
            tracing::warn!(target: "idem", record = %self.record_id(), error = %e, decision = Decision::RolledBack.as_str(), "the outcome could not be recorded in the transaction; rolled back, and the claim is released");
            self.settle(Settled::Released);
            CommitError::NotRecorded(e)
        }
    }
}

async fn rollback<T: StoreTransaction>(tx: T, claim: &Claim) {
    if let Err(e) = tx.rollback().await {
        // A database rolls back a transaction whose connection is gone.
        tracing::warn!(target: "idem", record = %claim.record_id(), error = %e, "rollback failed");
    }
}
