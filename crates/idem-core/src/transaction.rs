//! `StoreTransaction`: the caller's own database transaction, in which the
//! record is completed beside the operation's writes.

use crate::claim::Claim;
use crate::store::{Outcome, StoreError};

/// A transaction of the store's database that the operation opened for its
/// own writes, and in which it completes its record too: the record is
/// completed if and only if the writes commit. A store whose records live in
/// a transactional database offers one (`idem_postgres::PgTransaction`).
///
/// Adapters build the strongest guarantee on it: `idem_axum::commit_response`
/// records a handler's response in the handler's transaction and commits.
#[async_trait::async_trait]
pub trait StoreTransaction: Send + Sized {
    /// Completes `claim`'s record with `outcome` inside this transaction.
    ///
    /// Fails with [`lease_lost`](StoreError::lease_lost) if the claim was
    /// lost (its lease ran out, or another holder took it over): the caller
    /// must then roll back, since another attempt may run the operation.
    async fn complete(&mut self, claim: &Claim, outcome: &Outcome) -> Result<(), StoreError>;

    /// Commits the writes and the record together. Once this returns `Ok`,
    /// the claims completed in the transaction are marked
    /// [completed externally](Claim::mark_completed_externally). An error
    /// leaves the outcome unknown to the caller (the commit may have been
    /// applied before the connection failed).
    async fn commit(self) -> Result<(), StoreError>;

    /// Rolls the writes and the record back.
    async fn rollback(self) -> Result<(), StoreError>;
}
