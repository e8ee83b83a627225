//! `MySqlStore`: a store on MariaDB or MySQL, how it is built and configured, and its transitions, each one statement.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::{
    async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store,
    StoreError, StoreFuture,
};
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, MySqlConnection};

use crate::sql::InvalidName;
use crate::sql::{check_name, Sql};
use crate::transaction::MySqlTransaction;
use crate::wake::Wakes;
use crate::{calls, db_error, migration};

/// A [`Store`] on MariaDB or MySQL. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    database: Option<Arc<str>>,
    table: Arc<str>,
    /// How long a completed record is traced once expired.
    trace: Duration,
    sql: Arc<Sql>,
    /// This process's waiting duplicates, woken by its own changes.
    wakes: Arc<Wakes>,
}

impl fmt::Debug for MySqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlStore")
            .field("database", &self.database)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// The default table.
pub const DEFAULT_TABLE: &str = "idem_records";

/// How long a completed record's trace outlives it by default: a day.
pub const DEFAULT_TRACE: Duration = Duration::from_hours(24);

impl MySqlStore {
    /// A store on `pool`, in the table `idem_records` of the pool's database.
    pub fn new(pool: MySqlPool) -> Self {
        let sql = Arc::new(Sql::new(None, DEFAULT_TABLE, micros(DEFAULT_TRACE)));
        Self {
            wakes: Wakes::new(pool.clone(), Arc::clone(&sql)),
            pool,
            database: None,
            table: DEFAULT_TABLE.into(),
            trace: DEFAULT_TRACE,
            sql,
        }
    }

    /// The statements rendered again for the current settings.
    fn rendered(mut self) -> Self {
        self.sql = Arc::new(Sql::new(
            self.database.as_deref(),
            &self.table,
            micros(self.trace),
        ));
        self.wakes = Wakes::new(self.pool.clone(), Arc::clone(&self.sql));
        self
    }

    /// Uses a table in `database` rather than the pool's (1 to 64 of
    /// `a-z`, `0-9`, `_`).
    pub fn with_database(mut self, database: &str) -> Result<Self, InvalidName> {
        check_name(database)?;
        self.database = Some(database.into());
        Ok(self.rendered())
    }

    /// Uses another table name (1 to 64 of `a-z`, `0-9`, `_`).
    pub fn with_table(mut self, table: &str) -> Result<Self, InvalidName> {
        check_name(table)?;
        self.table = table.into();
        Ok(self.rendered())
    }

    /// How long after a completed record expires a retry of it is still
    /// refused ([`Begin::Expired`], HTTP 412)
    /// rather than run again (default [`DEFAULT_TRACE`], a day;
    /// `Duration::ZERO` turns it off). The trace is the row itself, kept
    /// that much longer: the purge deletes rows whose deadline is older
    /// than the trace.
    #[must_use]
    pub fn with_expired_trace(mut self, trace: Duration) -> Self {
        self.trace = trace;
        self.rendered()
    }

    /// The pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// The database, if set with [`with_database`](Self::with_database).
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Opens a transaction on the store's pool, safely under cancellation,
    /// for the operation's writes and its record ([`MySqlTransaction`]).
    ///
    /// The transaction is opened in a spawned task: an HTTP handler is
    /// dropped when its client disconnects, and a `BEGIN` abandoned half
    /// way could otherwise hand its connection back to the pool inside a
    /// transaction nobody tracks. If the caller goes away, the task
    /// finishes `BEGIN` and the dropped transaction rolls back.
    pub async fn begin_transaction(&self) -> Result<MySqlTransaction, sqlx::Error> {
        let pool = self.pool.clone();
        match tokio::spawn(async move { pool.begin().await }).await {
            Ok(result) => result.map(|tx| {
                MySqlTransaction::new(Arc::clone(&self.sql), tx, Arc::clone(&self.wakes))
            }),
            Err(e) => Err(sqlx::Error::Io(std::io::Error::other(format!(
                "the task opening the transaction failed: {e}"
            )))),
        }
    }

    /// The migration's statement, for your own migration tool. A table made
    /// by a version before records named their format also needs
    /// `ALTER TABLE <table> ADD COLUMN format SMALLINT NOT NULL DEFAULT 1`
    /// ([`migrate`](Self::migrate) adds it itself).
    pub fn migration_sql(&self) -> String {
        format!("{};\n", self.sql.migration)
    }

    /// Creates the table and its index if they do not exist, then checks
    /// that the table has every column the store reads (a table of the
    /// same name made by something else fails here, not on the first
    /// request). Safe to run twice, and from several instances at once.
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(AssertSqlSafe(self.sql.migration.clone()))
            .execute(&self.pool)
            .await?;
        let table = match &self.database {
            Some(database) => format!("`{database}`.`{}`", self.table),
            None => format!("`{}`", self.table),
        };
        migration::add_format_column(&self.pool, self.database.as_deref(), &self.table, &table)
            .await?;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SELECT id, fingerprint, token, completed, deadline, outcome, format \
             FROM {table} LIMIT 0"
        )))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes up to `limit` expired records, oldest first; returns how many.
    pub async fn purge_expired(&self, limit: u32) -> Result<u64, StoreError> {
        calls::purge(&self.pool, &self.sql, limit).await
    }

    /// Purges expired records every `every`, `batch` at a time, until the
    /// returned handle is aborted or dropped with the runtime.
    pub fn spawn_purger(&self, every: Duration, batch: u32) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        idem_core::spawn_purger("mysql", every, batch, move |n| {
            let store = store.clone();
            async move { store.purge_expired(n).await }
        })
    }

    /// Completes the record `id` for a lease taken with [`Store::begin`]
    /// directly, rather than through the engine, inside the caller's
    /// transaction: the record is completed if and only if it commits. Fails
    /// with `LeaseLost` if the lease is no longer the live claim (roll back
    /// then). Through the engine, use [`Claim::commit`](idem_core::Claim::commit).
    pub async fn complete_in_transaction_with_lease(
        &self,
        tx: &mut MySqlConnection,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        calls::complete(tx, &self.sql, id, lease, outcome, ttl).await
    }

    /// [`Store::complete`], on a connection of the pool.
    async fn complete_on_pool(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| db_error::db_error("complete", e))?;
        calls::complete(&mut conn, &self.sql, id, lease, outcome, ttl).await?;
        self.wakes.wake(id);
        Ok(())
    }
}

#[async_trait]
impl Store for MySqlStore {
    fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin> {
        let (pool, sql) = (self.pool.clone(), Arc::clone(&self.sql));
        let (id, fingerprint) = (*id, *fingerprint);
        StoreFuture::boxed(async move { calls::begin(&pool, &sql, &id, &fingerprint, lease).await })
    }

    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        let (store, id, lease, outcome) = (self.clone(), *id, *lease, outcome.clone());
        StoreFuture::boxed(async move { store.complete_on_pool(&id, &lease, &outcome, ttl).await })
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        calls::fenced(&self.pool, "release", &self.sql.release, id, lease, None).await?;
        self.wakes.wake(id);
        Ok(())
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        calls::fenced(
            &self.pool,
            "renew",
            &self.sql.renew,
            id,
            lease,
            Some(duration),
        )
        .await?;
        Ok(Lease {
            token: lease.token,
            duration,
        })
    }

    fn name(&self) -> &'static str {
        "mysql"
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        calls::inspect(&self.pool, &self.sql, id).await
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        let removal = calls::remove(&self.pool, &self.sql, id, force).await?;
        if removal == Removal::Removed {
            self.wakes.wake(id);
        }
        Ok(removal)
    }

    // Not woken by changes made elsewhere: the engine polls with growing
    // pauses, and each pause ends early when this process changes the record.
    fn wakes(&self) -> bool {
        false
    }

    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        self.wakes.wait(*id, within).await
    }
}
