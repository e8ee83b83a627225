//! `SqlTransaction`: the operation's own transaction, in which its record
//! is completed beside its writes.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use idem_core::store::async_trait;
use idem_core::{Lease, Outcome, RecordId, StoreError, StoreTransaction};
use sqlx::{Pool, Transaction};
use tokio::sync::OwnedSemaphorePermit;

use crate::dialect::Dialect;
use crate::transitions::{complete_on, wake};
use crate::wakes::Wakes;

/// A transaction opened by
/// [`SqlStore::begin_transaction`](crate::SqlStore::begin_transaction) for an
/// operation's writes (it dereferences to the connection:
/// `.execute(&mut *tx)`) and its record
/// ([`Claim::commit`](idem_core::Claim::commit)): the record is completed
/// if and only if the writes commit, and only while the claim holds. The
/// completion holds the record's row (SQLite: the database's write lock)
/// until the commit, so an attempt that would take the claim over waits for
/// it. Dropped without a commit, it rolls back.
pub struct SqlTransaction<D: Dialect> {
    pool: Pool<D>,
    sql: Arc<D::Sql>,
    /// The store's waiters, woken when the commit makes the record visible.
    wakes: Arc<Wakes>,
    tx: Transaction<'static, D>,
    /// Its turn as a writer in this process, where the database runs one at
    /// a time: given back when it ends.
    turn: Option<OwnedSemaphorePermit>,
    /// The record completed in it, whose waiters the commit wakes.
    completed: Option<RecordId>,
}

impl<D: Dialect> fmt::Debug for SqlTransaction<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlTransaction")
            .field("database", &D::STORE)
            .finish_non_exhaustive()
    }
}

impl<D: Dialect> SqlTransaction<D> {
    pub(crate) fn new(
        pool: Pool<D>,
        sql: Arc<D::Sql>,
        wakes: Arc<Wakes>,
        tx: Transaction<'static, D>,
        turn: Option<OwnedSemaphorePermit>,
    ) -> Self {
        Self {
            pool,
            sql,
            wakes,
            tx,
            turn,
            completed: None,
        }
    }

    /// Commits (writes only: to commit them with a claim's record, hand the
    /// transaction to [`Claim::commit`](idem_core::Claim::commit) instead).
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let Self {
            pool,
            sql,
            wakes,
            tx,
            turn,
            completed,
        } = self;
        tx.commit().await?;
        drop(turn);
        if let Some(id) = completed {
            wake::<D>(&pool, &sql, &wakes, &id);
        }
        Ok(())
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl<D: Dialect> Deref for SqlTransaction<D> {
    type Target = D::Connection;
    fn deref(&self) -> &D::Connection {
        &self.tx
    }
}

impl<D: Dialect> DerefMut for SqlTransaction<D> {
    fn deref_mut(&mut self) -> &mut D::Connection {
        &mut self.tx
    }
}

#[async_trait]
impl<D: Dialect> StoreTransaction for SqlTransaction<D> {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        complete_on::<D>(&mut self.tx, &self.sql, id, lease, outcome, ttl).await?;
        self.completed = Some(*id);
        Ok(())
    }

    async fn commit(self) -> Result<(), StoreError> {
        SqlTransaction::commit(self)
            .await
            .map_err(|e| D::error("commit", e))
    }

    async fn rollback(self) -> Result<(), StoreError> {
        SqlTransaction::rollback(self)
            .await
            .map_err(|e| D::error("rollback", e))
    }
}
