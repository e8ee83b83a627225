//! `MySqlTransaction`: the operation's own transaction, in which its record
//! is completed beside its writes.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use std::time::Duration;

use idem_core::{async_trait, Lease, Outcome, RecordId, StoreError, StoreTransaction};
use sqlx::{MySql, MySqlConnection, Transaction};

use crate::calls;
use crate::db_error::db_error;
use crate::sql::Sql;
use crate::wake::Wakes;

/// A transaction opened by
/// [`MySqlStore::begin_transaction`](crate::MySqlStore::begin_transaction)
/// for an operation's writes (it dereferences to the connection:
/// `.execute(&mut *tx)`) and its record ([`Claim::commit`](idem_core::Claim::commit)): the record is
/// completed if and only if the writes commit, and only while the claim
/// holds. The completion locks the record's row until the commit, so an
/// attempt that would take the claim over waits for it. Dropped without a
/// commit, it rolls back.
pub struct MySqlTransaction {
    sql: Arc<Sql>,
    tx: Transaction<'static, MySql>,
    wakes: Arc<Wakes>,
    /// The record completed in it, whose waiters the commit wakes.
    completed: Option<RecordId>,
}

impl fmt::Debug for MySqlTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlTransaction").finish_non_exhaustive()
    }
}

impl MySqlTransaction {
    pub(crate) fn new(sql: Arc<Sql>, tx: Transaction<'static, MySql>, wakes: Arc<Wakes>) -> Self {
        Self {
            sql,
            tx,
            wakes,
            completed: None,
        }
    }

    /// Commits (writes only: to commit them with a claim's record, hand the
    /// transaction to [`Claim::commit`](idem_core::Claim::commit) instead).
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let (wakes, completed) = (self.wakes, self.completed);
        self.tx.commit().await?;
        if let Some(id) = completed {
            wakes.wake(&id);
        }
        Ok(())
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl Deref for MySqlTransaction {
    type Target = MySqlConnection;
    fn deref(&self) -> &MySqlConnection {
        &self.tx
    }
}

impl DerefMut for MySqlTransaction {
    fn deref_mut(&mut self) -> &mut MySqlConnection {
        &mut self.tx
    }
}

#[async_trait]
impl StoreTransaction for MySqlTransaction {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        calls::complete(&mut self.tx, &self.sql, id, lease, outcome, ttl).await?;
        self.completed = Some(*id);
        Ok(())
    }

    async fn commit(self) -> Result<(), StoreError> {
        MySqlTransaction::commit(self)
            .await
            .map_err(|e| db_error("commit", e))
    }

    async fn rollback(self) -> Result<(), StoreError> {
        MySqlTransaction::rollback(self)
            .await
            .map_err(|e| db_error("rollback", e))
    }
}
