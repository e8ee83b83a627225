//! `PgTransaction`: the operation's own transaction, in which its record is
//! completed beside its writes.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use std::time::Duration;

use idem_core::{async_trait, Lease, Outcome, RecordId, StoreError, StoreTransaction};
use sqlx::{PgConnection, Postgres, Transaction};

use crate::calls;
use crate::sql::Sql;

/// A transaction opened by [`PgStore::begin_transaction`](crate::PgStore::begin_transaction) for an operation's
/// writes (it dereferences to the connection: `.execute(&mut *tx)`) and its
/// record ([`Claim::commit`](idem_core::Claim::commit)): the record is completed if and only if the
/// writes commit, and only while the claim holds: the completion locks the
/// record's row until the commit, so an attempt that would take the claim
/// over waits for it. Dropped without a commit, it rolls back.
pub struct PgTransaction {
    sql: Arc<Sql>,
    tx: Transaction<'static, Postgres>,
}

impl fmt::Debug for PgTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTransaction").finish_non_exhaustive()
    }
}

impl PgTransaction {
    pub(crate) fn new(sql: Arc<Sql>, tx: Transaction<'static, Postgres>) -> Self {
        Self { sql, tx }
    }

    /// Commits (writes only: to commit them with a claim's record, hand the
    /// transaction to [`Claim::commit`](idem_core::Claim::commit) instead).
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl Deref for PgTransaction {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.tx
    }
}

impl DerefMut for PgTransaction {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

fn commit_error(what: &str, e: sqlx::Error) -> StoreError {
    StoreError::unavailable(format!("postgres {what} failed"), e)
}

#[async_trait]
impl StoreTransaction for PgTransaction {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        calls::complete(&mut self.tx, &self.sql, id, lease, outcome, ttl).await
    }

    async fn commit(self) -> Result<(), StoreError> {
        PgTransaction::commit(self)
            .await
            .map_err(|e| commit_error("commit", e))
    }

    async fn rollback(self) -> Result<(), StoreError> {
        PgTransaction::rollback(self)
            .await
            .map_err(|e| commit_error("rollback", e))
    }
}
