//! `StoreTransaction`: the operation's own writes in its store, committed
//! together with its record.

use std::time::Duration;

use crate::key::RecordId;
use crate::store::{Lease, Outcome, StoreError};

/// The operation's writes to its store's own data (a balance, an order row),
/// opened by the store for the operation and committed together with the
/// record by [`Claim::commit`](crate::Claim::commit): the writes and the record happen together,
/// and only while the claim holds, or not at all.
///
/// Every store of idem offers one: `idem_postgres::PgTransaction` (a
/// database transaction: the record's row is locked from the completion to
/// the commit), `idem_redis::RedisTransaction` and
/// [`MemoryTransaction`](crate::memory::MemoryTransaction) (optimistic: the
/// commit checks the claim and what was read, and applies the writes and the
/// record in one atomic step). Adapters build on it: `idem_axum::commit_response`
/// records a handler's response in the handler's transaction and commits.
#[async_trait::async_trait]
pub trait StoreTransaction: Send + Sized {
    /// Records `outcome` in this transaction as the record `id`'s, kept for
    /// `ttl`, under the claim `lease`: what [`Store::complete`](crate::Store::complete)
    /// does, inside the transaction. A store that checks the claim here fails
    /// with [`lease_lost`](StoreError::lease_lost) if it was lost; others
    /// check at [`commit`](Self::commit). [`Claim::commit`](crate::Claim::commit)
    /// calls it with its claim's record, lease and lifetime.
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Commits the writes and the record together. Errors:
    /// [`LeaseLost`](crate::StoreErrorKind::LeaseLost),
    /// [`Conflict`](crate::StoreErrorKind::Conflict) and
    /// [`Unsupported`](crate::StoreErrorKind::Unsupported) (refused before
    /// anything was sent) applied nothing; any other leaves the outcome
    /// unknown (the commit may have been applied
    /// before the connection failed). Use [`Claim::commit`](crate::Claim::commit), which says to
    /// the engine what became of the claim.
    async fn commit(self) -> Result<(), StoreError>;

    /// Drops the writes and the record.
    async fn rollback(self) -> Result<(), StoreError>;
}
