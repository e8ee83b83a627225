//! `Dialect`: what one SQL database supplies to the store written once in
//! this crate: its statements, its clock (inside them), its error mapping
//! and how it is set up. Everything a dialect answers is plain data; what
//! the answers mean (the transition table's rows) is decided once, in
//! `sql_store.rs`.

use std::future::Future;
use std::sync::Arc;

use idem_core::{Fingerprint, RecordId, StoreError};
use sqlx::{Database, Pool, Transaction};

/// What a claim's statement found.
#[derive(Debug)]
pub enum ClaimFound {
    /// The record was new or no longer live: claimed, with this fencing
    /// token (machine rows: none | begin -> Acquired).
    Granted(i64),
    /// The record is live or traced: nothing was changed, and this is what
    /// it holds.
    Found(Found),
    /// The record changed between the claim and its read (or the database
    /// rolled the claim back whole): nothing was claimed; claim again.
    Again,
}

/// A live or traced record that refused a claim.
#[derive(Debug)]
pub struct Found {
    /// Its fingerprint is the claim's.
    pub same: bool,
    /// Its deadline is ahead (in flight, or completed and replayed); if not,
    /// it is a completed record's trace.
    pub live: bool,
    /// Its outcome is recorded.
    pub completed: bool,
    /// The outcome, when completed, live and of the same fingerprint.
    pub outcome: Option<Vec<u8>>,
    /// Microseconds left before its deadline (0 or less: none).
    pub left_us: i64,
    /// The record format that wrote it.
    pub format: i16,
}

/// A live record's columns, for operators and for waking waiters.
#[derive(Debug)]
pub struct Columns {
    /// The fingerprint, 32 bytes.
    pub fingerprint: Vec<u8>,
    /// The token of its latest claim.
    pub token: i64,
    /// Its outcome is recorded.
    pub completed: bool,
    /// The outcome, when completed.
    pub outcome: Option<Vec<u8>>,
    /// Microseconds left before its deadline.
    pub left_us: i64,
    /// The record format that wrote it.
    pub format: i16,
}

/// What a removal did: whether it ended the record, whether a live (or
/// traced) record was there, and its format.
#[derive(Debug)]
pub struct Ended {
    /// The record was ended (it is no longer live).
    pub ended: bool,
    /// A live or traced record was there.
    pub live: bool,
    /// Its format.
    pub format: i16,
}

impl Ended {
    /// The removal ended the live record there, of `format`.
    pub fn live_one(format: i16) -> Self {
        Self {
            ended: true,
            live: true,
            format,
        }
    }
}

/// What a purge did.
#[derive(Debug, Default)]
pub struct Purged {
    /// How many records it deleted.
    pub count: u64,
    /// The latest deadline among them (µs since the epoch; 0 if none, or if
    /// the dialect does not say).
    pub last_us: i64,
}

impl Purged {
    /// `count` records deleted, at deadlines the dialect does not say.
    pub fn count(count: u64) -> Self {
        Self { count, last_us: 0 }
    }
}

/// What a notification channel tells the store's waiters
/// ([`Dialect::listen`]).
#[derive(Clone, Copy, Debug)]
pub enum Heard {
    /// The channel is up: waiters can count on being woken.
    Up,
    /// The channel went down (changes may have been missed): waiters look
    /// again, and poll until it is back.
    Down,
    /// The record changed (completed, released or removed), in this process
    /// or another.
    Changed(RecordId),
}

/// Where a notification channel's news go: [`Dialect::listen`] calls it
/// for each.
pub type Listener = Arc<dyn Fn(Heard) + Send + Sync>;

/// One SQL database as the store sees it. Implemented by this crate for each
/// database it supports (behind a feature of the database's name); the
/// store, its transactions, its waiters and its purge are written once over
/// it ([`SqlStore`](crate::SqlStore)).
///
/// Each method runs one statement (or, where the database needs it, a
/// statement and its read) and answers in plain data; failures come back
/// as sqlx's errors, which [`error`](Self::error) names.
pub trait Dialect: Database {
    /// The store's name in metrics and errors (`sqlite`).
    const STORE: &'static str;
    /// The record format this version writes and reads (the `format`
    /// column). A row of a later format is refused as newer, never misread
    /// nor taken over.
    const FORMAT: i16;
    /// Whether the database runs one writer at a time (SQLite): this
    /// process's writers then take turns before they write, instead of
    /// waiting in the database's busy handler.
    const ONE_WRITER: bool = false;
    /// The longest table name the database takes.
    const LONGEST_NAME: usize;
    /// The table a store uses unless told otherwise.
    const DEFAULT_TABLE: &'static str = "idem_records";
    /// What else the statements are rendered for (MySQL: the database the
    /// table is in); `()` for none.
    type Settings: Clone + Default + Send + Sync + 'static;
    /// The statements, rendered once for a table and a trace.
    type Sql: Send + Sync + 'static;

    /// The statements on `table` (under `settings`), with completed records
    /// traced `trace_us` past their expiry.
    fn render(settings: &Self::Settings, table: &str, trace_us: u64) -> Self::Sql;

    /// Opens a transaction for an operation's writes and its record (the
    /// pool's `BEGIN` unless the database needs another).
    fn begin_writes(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Transaction<'static, Self>, sqlx::Error>> + Send {
        pool.begin()
    }

    /// Claims `id` for `fingerprint` for `lease_us`, or reads what refused
    /// the claim.
    fn claim(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease_us: i64,
    ) -> impl Future<Output = Result<ClaimFound, sqlx::Error>> + Send;

    /// Completes `id` with `outcome` for `ttl_us` if `token` holds its live
    /// claim, on `conn` (a pool's connection or the operation's
    /// transaction); whether it did.
    fn complete(
        conn: &mut Self::Connection,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
        ttl_us: i64,
        outcome: &[u8],
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// Whether `id` is live and completed by `token` already.
    fn completed_by(
        conn: &mut Self::Connection,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// Ends the claim `token` on `id`; whether it held.
    fn release(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// Moves the claim `token`'s deadline on `id` to `lease_us` from now;
    /// whether it held.
    fn renew(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
        lease_us: i64,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// The live record `id` (or one of a newer format, live or not).
    fn inspect(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
    ) -> impl Future<Output = Result<Option<Columns>, sqlx::Error>> + Send;

    /// Ends the live or traced record `id` (an in-flight one only if
    /// `force`), keeping its token.
    fn remove(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        force: bool,
    ) -> impl Future<Output = Result<Ended, sqlx::Error>> + Send;

    /// Deletes up to `limit` records neither live nor traced whose token the
    /// clock has passed, oldest first; a dialect whose index keeps a deleted
    /// row's entries until a vacuum (PostgreSQL) starts at the deadline
    /// `from_us` (µs since the epoch: where the last purge stopped, or 0),
    /// others may start from the oldest.
    fn purge(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        limit: u32,
        from_us: i64,
    ) -> impl Future<Output = Result<Purged, sqlx::Error>> + Send;

    /// Whether the database tells this process of changes other processes
    /// make (PostgreSQL's `LISTEN`), under `settings`. If not, waiters are
    /// woken at once by this process's own changes and poll for the rest.
    fn notifies(_settings: &Self::Settings) -> bool {
        false
    }

    /// Listens for changes on the store's channel and tells `heard` of each
    /// (and of the channel going up and down), until the process ends;
    /// started once per store, on the first wait, where
    /// [`notifies`](Self::notifies).
    fn listen(
        _pool: Pool<Self>,
        _settings: Self::Settings,
        _sql: Arc<Self::Sql>,
        _heard: Listener,
    ) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    /// Marks `id` as waited on, so that its next change is notified, if it
    /// is still in flight; `false` if it has changed already. Only where
    /// the database [`notifies`](Self::notifies).
    fn watch(
        _pool: &Pool<Self>,
        _sql: &Self::Sql,
        _id: &RecordId,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send {
        std::future::ready(Ok(true))
    }

    /// Creates the table and its index if they do not exist, then checks
    /// that the table is one the store can use.
    fn migrate(
        pool: &Pool<Self>,
        sql: &Self::Sql,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The migration's statements, for the user's own migration tool.
    fn migration_sql(sql: &Self::Sql) -> String;

    /// `e`, met while doing `what`, as a [`StoreError`] of the right kind,
    /// saying what to do.
    fn error(what: &str, e: sqlx::Error) -> StoreError;
}
