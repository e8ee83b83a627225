//! `SqlStore`: the store on a SQL database, written once over its
//! [`Dialect`]: how it is built and configured, what each answer of the
//! dialect's statements means (the transition table's rows), waking this
//! process's waiters, and the purge.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::store::{async_trait, Begin, StoreFuture};
use idem_core::waiters::Look;
use idem_core::{Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store, StoreError};
use sqlx::Pool;

use crate::dialect::{Dialect, Listener};
use crate::names::{check_name, InvalidName};
use crate::purge_cursor::PurgeCursor;
use crate::sql_transaction::SqlTransaction;
use crate::transitions::{begin, complete_on, inspect, newer, token, us, wake};
use crate::turns::{TurnTimedOut, Turns};
use crate::wakes::Wakes;

/// How long a completed record's trace outlives it by default: a day.
pub const DEFAULT_TRACE: Duration = Duration::from_hours(24);

/// A [`Store`] on a SQL database `D` (for SQLite, `SqliteStore`). Cheap to
/// clone: clones share the pool and the waiters.
pub struct SqlStore<D: Dialect> {
    pool: Pool<D>,
    table: Arc<str>,
    /// What else the statements are rendered for.
    pub(crate) settings: D::Settings,
    /// How long a completed record is traced once expired.
    trace: Duration,
    sql: Arc<D::Sql>,
    /// The waiting duplicates, woken by this process's changes and by the
    /// database's channel where it has one.
    wakes: Arc<Wakes>,
    /// This process's writers, one at a time where the database runs one.
    turns: Turns,
    /// Where the next purge starts.
    purged: PurgeCursor,
}

impl<D: Dialect> Clone for SqlStore<D> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            table: Arc::clone(&self.table),
            settings: self.settings.clone(),
            trace: self.trace,
            sql: Arc::clone(&self.sql),
            wakes: Arc::clone(&self.wakes),
            turns: self.turns.clone(),
            purged: self.purged.clone(),
        }
    }
}

impl<D: Dialect> fmt::Debug for SqlStore<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlStore")
            .field("database", &D::STORE)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl<D: Dialect> SqlStore<D> {
    /// A store on `pool`, in the dialect's default table (`idem_records`;
    /// PostgreSQL: `idem.records`).
    pub fn new(pool: Pool<D>) -> Self {
        let settings = D::Settings::default();
        Self {
            pool,
            table: D::DEFAULT_TABLE.into(),
            sql: Arc::new(D::render(
                &settings,
                D::DEFAULT_TABLE,
                micros(DEFAULT_TRACE),
            )),
            wakes: Arc::new(waiters_for::<D>(&settings)),
            settings,
            trace: DEFAULT_TRACE,
            turns: if D::ONE_WRITER {
                Turns::one_at_a_time()
            } else {
                Turns::default()
            },
            purged: PurgeCursor::default(),
        }
    }

    /// The statements rendered again for the current settings, and waiters
    /// and a purge of their own (another table holds other records).
    pub(crate) fn rendered(mut self) -> Self {
        self.sql = Arc::new(D::render(&self.settings, &self.table, micros(self.trace)));
        self.wakes = Arc::new(waiters_for::<D>(&self.settings));
        self.purged = PurgeCursor::default();
        self
    }

    /// Uses another table (1 to the database's longest name of `a-z`,
    /// `0-9`, `_`).
    pub fn with_table(mut self, table: &str) -> Result<Self, InvalidName> {
        check_name(table, D::LONGEST_NAME)?;
        self.table = table.into();
        Ok(self.rendered())
    }

    /// How long after a completed record expires a retry of it is still
    /// refused ([`Begin::Expired`], HTTP 412) rather than run again (default
    /// [`DEFAULT_TRACE`], a day; `Duration::ZERO` turns it off). The trace is
    /// the row itself, kept that much longer: the purge deletes rows whose
    /// deadline is older than the trace.
    #[must_use]
    pub fn with_expired_trace(mut self, trace: Duration) -> Self {
        self.trace = trace;
        self.rendered()
    }

    /// The pool.
    pub fn pool(&self) -> &Pool<D> {
        &self.pool
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The migration's statements, for your own migration tool.
    pub fn migration_sql(&self) -> String {
        D::migration_sql(&self.sql)
    }

    /// Creates the table and its index if they do not exist, then checks
    /// that the table has every column the store reads (a table of the
    /// same name made by something else fails here, not on the first
    /// request). Safe to run twice, and from several instances at once.
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        D::migrate(&self.pool, &self.sql).await
    }

    /// Deletes up to `limit` records that are neither live nor traced,
    /// oldest first; returns how many.
    pub async fn purge_expired(&self, limit: u32) -> Result<u64, StoreError> {
        let _turn = self.turn("purge").await?;
        let purged = D::purge(&self.pool, &self.sql, limit, self.purged.start())
            .await
            .map_err(|e| D::error("purge", e))?;
        self.purged.advance(purged.last_us);
        Ok(purged.count)
    }

    /// Purges expired records every `every`, `batch` at a time, until the
    /// returned handle is aborted or dropped with the runtime.
    pub fn spawn_purger(&self, every: Duration, batch: u32) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        idem_core::store::spawn_purger(D::STORE, every, batch, move |n| {
            let store = store.clone();
            async move { store.purge_expired(n).await }
        })
    }

    /// Opens a transaction on the store's pool, safely under cancellation,
    /// for the operation's writes and its record ([`SqlTransaction`]).
    ///
    /// The transaction is opened in a spawned task: an HTTP handler is
    /// dropped when its client disconnects, and a `BEGIN` abandoned half
    /// way could otherwise hand its connection back to the pool inside a
    /// transaction nobody tracks. If the caller goes away, the task
    /// finishes `BEGIN` and the dropped transaction rolls back.
    pub async fn begin_transaction(&self) -> Result<SqlTransaction<D>, sqlx::Error> {
        // The transaction's turn as a writer, held until it ends.
        let turn = self
            .turns
            .take()
            .await
            .map_err(|TurnTimedOut| sqlx::Error::PoolTimedOut)?;
        let pool = self.pool.clone();
        match tokio::spawn(async move { D::begin_writes(&pool).await }).await {
            Ok(result) => result.map(|tx| {
                SqlTransaction::new(
                    self.pool.clone(),
                    Arc::clone(&self.sql),
                    Arc::clone(&self.wakes),
                    tx,
                    turn,
                )
            }),
            Err(e) => Err(sqlx::Error::Io(std::io::Error::other(format!(
                "the task opening the transaction failed: {e}"
            )))),
        }
    }

    /// Completes the record `id` for a lease taken with [`Store::begin`]
    /// directly, rather than through the engine, inside the caller's
    /// transaction: the record is completed if and only if it commits. Fails
    /// with `LeaseLost` if the lease is no longer the live claim (roll back
    /// then). Through the engine, use [`Claim::commit`](idem_core::Claim::commit).
    pub async fn complete_in_transaction_with_lease(
        &self,
        tx: &mut D::Connection,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        complete_on::<D>(tx, &self.sql, id, lease, outcome, ttl).await
    }

    /// Waits for this writer's turn (held until the permit is dropped), or
    /// gives `what` up as transient.
    async fn turn(
        &self,
        what: &str,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, StoreError> {
        self.turns.take().await.map_err(|TurnTimedOut| {
            StoreError::unavailable_because(format!(
                "{} {what}: the database stayed locked past the busy timeout (this process's \
                 other writers held it); nothing was changed",
                D::STORE
            ))
        })
    }

    /// Wakes this process's waiters of `id`, with one read of the record.
    fn wake(&self, id: &RecordId) {
        wake::<D>(&self.pool, &self.sql, &self.wakes, id);
    }

    /// Starts the database's channel's listener, the first time only.
    fn listen(&self) {
        self.wakes.listen_once(|| {
            let (pool, sql, wakes) = (
                self.pool.clone(),
                Arc::clone(&self.sql),
                Arc::clone(&self.wakes),
            );
            let read_pool = pool.clone();
            let read_sql = Arc::clone(&sql);
            let heard: Listener = Arc::new(move |heard| {
                let (pool, sql) = (read_pool.clone(), Arc::clone(&read_sql));
                wakes.heard(heard, move |id| async move {
                    inspect::<D>(&pool, &sql, &id).await.ok().flatten()
                });
            });
            tokio::spawn(D::listen(pool, self.settings.clone(), sql, heard));
        });
    }
}

/// The waiters for a store on `D` under `settings`: heard on the
/// database's channel, or woken locally and polled.
fn waiters_for<D: Dialect>(settings: &D::Settings) -> Wakes {
    if D::notifies(settings) {
        Wakes::channel()
    } else {
        Wakes::local()
    }
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D> {
    fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin> {
        let (store, id, fingerprint) = (self.clone(), *id, *fingerprint);
        StoreFuture::boxed(async move {
            let _turn = store.turn("begin").await?;
            begin::<D>(&store.pool, &store.sql, &id, &fingerprint, lease).await
        })
    }

    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        let (store, id, lease, outcome) = (self.clone(), *id, *lease, outcome.clone());
        StoreFuture::boxed(async move {
            let turn = store.turn("complete").await?;
            let mut conn = store
                .pool
                .acquire()
                .await
                .map_err(|e| D::error("complete", e))?;
            complete_on::<D>(&mut conn, &store.sql, &id, &lease, &outcome, ttl).await?;
            drop((conn, turn));
            store.wake(&id);
            Ok(())
        })
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        // in flight, holder's token | release -> Released; anything else |
        // release -> LeaseLost.
        let turn = self.turn("release").await?;
        if !D::release(&self.pool, &self.sql, id, token(lease))
            .await
            .map_err(|e| D::error("release", e))?
        {
            return Err(StoreError::lease_lost());
        }
        drop(turn);
        self.wake(id);
        Ok(())
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        // in flight, holder's token | renew -> Renewed; anything else |
        // renew -> LeaseLost.
        let _turn = self.turn("renew").await?;
        if !D::renew(&self.pool, &self.sql, id, token(lease), us(duration))
            .await
            .map_err(|e| D::error("renew", e))?
        {
            return Err(StoreError::lease_lost());
        }
        Ok(Lease {
            token: lease.token,
            duration,
        })
    }

    fn name(&self) -> &'static str {
        D::STORE
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        inspect::<D>(&self.pool, &self.sql, id).await
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        let turn = self.turn("remove").await?;
        let ended = D::remove(&self.pool, &self.sql, id, force)
            .await
            .map_err(|e| D::error("remove", e))?;
        drop(turn);
        newer::<D>(ended.format)?;
        // completed, traced, or in flight with force | remove -> Removed;
        // in flight, no force | remove -> RemoveRefused; none | remove ->
        // Absent.
        Ok(match (ended.ended, ended.live) {
            (true, _) => {
                self.wake(id);
                Removal::Removed
            }
            (false, true) => Removal::RefusedInFlight,
            (false, false) => Removal::Absent,
        })
    }

    // Without a channel, not woken by changes made elsewhere: the engine
    // polls with growing pauses, and each pause ends early when this process
    // changes the record.
    fn wakes(&self) -> bool {
        D::notifies(&self.settings)
    }

    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        if !D::notifies(&self.settings) {
            return self.wakes.wait(*id, within, async { Look::InFlight }).await;
        }
        self.listen();
        // Marked, the record's change is notified; changed already, read it.
        let look = async {
            match D::watch(&self.pool, &self.sql, id).await {
                Ok(true) => Look::InFlight,
                Ok(false) => {
                    Look::Changed(inspect::<D>(&self.pool, &self.sql, id).await.ok().flatten())
                }
                Err(_) => Look::Changed(None),
            }
        };
        self.wakes.wait(*id, within, look).await
    }
}
