//! `Dialect`: what one SQL database supplies to the store written once in
//! this crate: its statements, its clock (inside them), its error mapping
//! and how it is set up. Everything a dialect answers is plain data; what
//! the answers mean (the transition table's rows) is decided once, in
//! `sql_store.rs`.

use idem_core::{async_trait, Fingerprint, RecordId, StoreError};
use sqlx::{Database, Pool, Transaction};

/// What a claim's statement found.
#[derive(Debug)]
pub enum Claimed {
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

/// One SQL database as the store sees it. Implemented by this crate for each
/// database it supports (behind a feature of the database's name); the
/// store, its transactions, its waiters and its purge are written once over
/// it ([`SqlStore`](crate::SqlStore)).
///
/// Each method runs one statement (or, where the database needs it, a
/// statement and its read) and answers in plain data; failures come back
/// as sqlx's errors, which [`error`](Self::error) names.
#[async_trait]
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
    async fn begin_writes(pool: &Pool<Self>) -> Result<Transaction<'static, Self>, sqlx::Error> {
        pool.begin().await
    }

    /// Claims `id` for `fingerprint` for `lease_us`, or reads what refused
    /// the claim.
    async fn claim(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease_us: i64,
    ) -> Result<Claimed, sqlx::Error>;

    /// Completes `id` with `outcome` for `ttl_us` if `token` holds its live
    /// claim, on `conn` (a pool's connection or the operation's
    /// transaction); whether it did.
    async fn complete(
        conn: &mut Self::Connection,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
        ttl_us: i64,
        outcome: &[u8],
    ) -> Result<bool, sqlx::Error>;

    /// Whether `id` is live and completed by `token` already.
    async fn completed_by(
        conn: &mut Self::Connection,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
    ) -> Result<bool, sqlx::Error>;

    /// Ends the claim `token` on `id`; whether it held.
    async fn release(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
    ) -> Result<bool, sqlx::Error>;

    /// Moves the claim `token`'s deadline on `id` to `lease_us` from now;
    /// whether it held.
    async fn renew(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        token: i64,
        lease_us: i64,
    ) -> Result<bool, sqlx::Error>;

    /// The live record `id` (or one of a newer format, live or not).
    async fn inspect(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
    ) -> Result<Option<Columns>, sqlx::Error>;

    /// Ends the live or traced record `id` (an in-flight one only if
    /// `force`), keeping its token.
    async fn remove(
        pool: &Pool<Self>,
        sql: &Self::Sql,
        id: &RecordId,
        force: bool,
    ) -> Result<Ended, sqlx::Error>;

    /// Deletes up to `limit` records neither live nor traced whose token the
    /// clock has passed; how many.
    async fn purge(pool: &Pool<Self>, sql: &Self::Sql, limit: u32) -> Result<u64, sqlx::Error>;

    /// Creates the table and its index if they do not exist, then checks
    /// that the table is one the store can use.
    async fn migrate(pool: &Pool<Self>, sql: &Self::Sql) -> Result<(), sqlx::Error>;

    /// The migration's statements, for the user's own migration tool.
    fn migration_sql(sql: &Self::Sql) -> String;

    /// `e`, met while doing `what`, as a [`StoreError`] of the right kind,
    /// saying what to do.
    fn error(what: &str, e: sqlx::Error) -> StoreError;
}
