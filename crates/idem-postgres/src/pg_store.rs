//! `PgStore`: a store on PostgreSQL, how it is built and configured, and its transitions, each one statement.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::{
    async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store,
    StoreError, StoreFuture,
};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{AssertSqlSafe, PgConnection};

use crate::calls;
use crate::calls::{db_error, us};
use crate::purge_cursor::PurgeCursor;
use crate::sql::InvalidName;
use crate::sql::{check_name, Sql};
use crate::transaction::PgTransaction;
use crate::wake::Wakes;
use idem_core::waiters::Look;

/// A [`Store`] on PostgreSQL. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    schema: Arc<str>,
    table: Arc<str>,
    sql: Arc<Sql>,
    wakes: Arc<Wakes>,
    /// Where the woken wait's `LISTEN` connects: the pool's server unless
    /// set; none behind a transaction pooler without it (waiters poll).
    listen: Listen,
    /// How long a completed record is traced once expired.
    trace: Duration,
    /// Where the next purge starts.
    purged: PurgeCursor,
}

/// Where the woken wait listens.
#[derive(Clone)]
enum Listen {
    /// On a connection of the pool's own options.
    Pool,
    /// On a direct connection with these options.
    Direct(Arc<PgConnectOptions>),
    /// Nowhere: waiters poll.
    Off,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.schema)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// The default schema.
pub const DEFAULT_SCHEMA: &str = "idem";
/// The default table.
pub const DEFAULT_TABLE: &str = "records";

/// How long a completed record's trace outlives it by default: a day.
pub const DEFAULT_TRACE: Duration = Duration::from_hours(24);

impl PgStore {
    /// A store on `pool`, in schema `idem`, table `records`.
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            schema: DEFAULT_SCHEMA.into(),
            table: DEFAULT_TABLE.into(),
            sql: Arc::new(Sql::new(
                DEFAULT_SCHEMA,
                DEFAULT_TABLE,
                true,
                micros(DEFAULT_TRACE),
            )),
            wakes: Arc::default(),
            listen: Listen::Pool,
            trace: DEFAULT_TRACE,
            purged: PurgeCursor::default(),
        }
    }

    /// The statements rendered again for the current settings.
    fn render(&mut self, persistent: bool) {
        self.purged = PurgeCursor::default();
        self.sql = Arc::new(Sql::new(
            &self.schema,
            &self.table,
            persistent,
            micros(self.trace),
        ));
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
        self.render(self.sql.persistent);
        self
    }

    /// For a pool that reaches PostgreSQL through a pooler in transaction
    /// mode (PgBouncer's `pool_mode = transaction`, and others alike), which
    /// hands each server connection to another client once the server is
    /// idle:
    ///
    /// - the store sends each statement as one simple query with its
    ///   parameters written in as literals (hex `bytea`, digits), since no
    ///   prepared statement, named or unnamed, is safe across the pooler's
    ///   hand-overs (see below); one round trip each, as before;
    /// - the woken wait's `LISTEN` needs a session of its own, which a
    ///   transaction pooler does not give: set one with
    ///   [`listen_with`](Self::listen_with) (a direct connection to the
    ///   server, one per store), or waiting duplicates poll.
    ///
    /// Transactional completion ([`begin_transaction`](Self::begin_transaction)
    /// and `Claim::commit`) works unchanged: a transaction keeps its server
    /// connection from `BEGIN` to `COMMIT`.
    ///
    /// Your own statements through the pooler: inside a transaction, make
    /// them unnamed (`sqlx::query(..).persistent(false)`); outside one, a
    /// bound statement is not safe at all (sqlx sends `Parse`, waits for
    /// the server, then `Bind`, which the pooler may route to another
    /// client's server connection), so run it in a transaction, or use a
    /// pooler that tracks prepared statements (PgBouncer 1.21 and later, with
    /// `max_prepared_statements`).
    #[must_use]
    pub fn behind_transaction_pooler(mut self) -> Self {
        self.render(false);
        if matches!(self.listen, Listen::Pool) {
            self.listen = Listen::Off;
        }
        self
    }

    /// Whether the store was set up for a transaction pooler
    /// ([`behind_transaction_pooler`](Self::behind_transaction_pooler)): your
    /// statements on its pool should then be unnamed too.
    pub fn is_behind_transaction_pooler(&self) -> bool {
        !self.sql.persistent
    }

    /// The woken wait's `LISTEN` connects with `options` (a direct
    /// connection to the server, when the pool goes through a transaction
    /// pooler) instead of the pool's.
    #[must_use]
    pub fn listen_with(mut self, options: PgConnectOptions) -> Self {
        self.listen = Listen::Direct(Arc::new(options));
        self.wakes = Arc::default();
        self
    }

    /// Uses another schema (1 to 63 of `a-z`, `0-9`, `_`).
    pub fn with_schema(mut self, schema: &str) -> Result<Self, InvalidName> {
        check_name(schema)?;
        self.schema = schema.into();
        self.render(self.sql.persistent);
        self.wakes = Arc::default();
        Ok(self)
    }

    /// Uses another table name (1 to 63 of `a-z`, `0-9`, `_`).
    pub fn with_table(mut self, table: &str) -> Result<Self, InvalidName> {
        check_name(table)?;
        self.table = table.into();
        self.render(self.sql.persistent);
        self.wakes = Arc::default();
        Ok(self)
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Opens a transaction on the store's pool, safely under cancellation,
    /// for the operation's writes and its record ([`PgTransaction`]).
    ///
    /// `sqlx` 0.8 and 0.9 leave a pooled PostgreSQL connection inside an
    /// untracked transaction when the future of `Pool::begin` is dropped while
    /// its `BEGIN` is in flight (launchbadge/sqlx#2054, transact-rs/sqlx#4393);
    /// the next borrower's statements then run inside it and are never
    /// committed. An HTTP handler is dropped when its client disconnects, so
    /// this opens the transaction in a spawned task: if the caller goes away,
    /// the task finishes `BEGIN` and the dropped transaction rolls back.
    pub async fn begin_transaction(&self) -> Result<PgTransaction, sqlx::Error> {
        let pool = self.pool.clone();
        match tokio::spawn(async move { pool.begin().await }).await {
            Ok(result) => result.map(|tx| PgTransaction::new(Arc::clone(&self.sql), tx)),
            Err(e) => Err(sqlx::Error::Io(std::io::Error::other(format!(
                "the task opening the transaction failed: {e}"
            )))),
        }
    }

    /// The schema.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The migration's statements, for your own migration tool.
    pub fn migration_sql(&self) -> String {
        self.sql.migration.join(";\n") + ";\n"
    }

    /// Creates the schema, table and index if they do not exist. Safe to run
    /// twice, and from several instances at once (an advisory lock orders them).
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(7300861234500001)")
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        for statement in &self.sql.migration {
            sqlx::query(AssertSqlSafe(statement.clone()))
                .persistent(false)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }

    /// Deletes up to `limit` expired records; returns how many.
    pub async fn purge_expired(&self, limit: u32) -> Result<u64, StoreError> {
        let (purged, last) =
            calls::purge(&self.pool, &self.sql, limit, self.purged.start()).await?;
        self.purged.advance(last);
        Ok(purged)
    }

    /// Purges expired records every `every`, `batch` at a time, until the
    /// returned handle is aborted or dropped with the runtime.
    pub fn spawn_purger(&self, every: Duration, batch: u32) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        idem_core::spawn_purger("postgres", every, batch, move |n| {
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
        tx: &mut PgConnection,
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
            .map_err(|e| db_error("complete", e))?;
        calls::complete(&mut conn, &self.sql, id, lease, outcome, ttl).await
    }
}

#[async_trait]
impl Store for PgStore {
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
        calls::release(&self.pool, &self.sql, id, lease).await
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        calls::fenced_update(
            &self.pool,
            &self.sql,
            "renew",
            &self.sql.renew,
            id,
            lease,
            Some(us(duration)),
        )
        .await?;
        Ok(Lease {
            token: lease.token,
            duration,
        })
    }

    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        calls::inspect(&self.pool, &self.sql, id).await
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        calls::remove(&self.pool, &self.sql, id, force).await
    }

    fn wakes(&self) -> bool {
        !matches!(self.listen, Listen::Off)
    }

    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        let listen = match &self.listen {
            Listen::Pool => None,
            Listen::Direct(options) => Some(options),
            Listen::Off => {
                tokio::time::sleep(within).await;
                return None;
            }
        };
        self.wakes.start(&self.pool, listen, &self.sql);
        // Marked, the record's change notifies; changed already, read it.
        let look = async {
            match calls::watch(&self.pool, &self.sql, id).await {
                Ok(true) => Look::InFlight,
                Ok(false) => Look::Changed(
                    calls::inspect(&self.pool, &self.sql, id)
                        .await
                        .ok()
                        .flatten(),
                ),
                Err(_) => Look::Changed(None),
            }
        };
        self.wakes.waiters.wait(*id, within, look).await
    }
}
