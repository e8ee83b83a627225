//! PostgreSQL as a [`Dialect`]: each call one statement, bound and prepared
//! or, behind a transaction pooler, written out as literals
//! (`sending.rs`); changes notified on the store's channel to the waiters
//! that marked their record (`pg_listener.rs`).

use std::sync::Arc;

use idem_core::{Fingerprint, RecordId, StoreError};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{AssertSqlSafe, Postgres, Row};

use crate::dialect::{ClaimFound, Columns, Dialect, Ended, Listener, Purged};
use crate::postgres::pg_error::store_error;
use crate::postgres::pg_listener;
use crate::postgres::pg_store::{Listen, PgSettings};
use crate::postgres::sending::{execute, fetch_one, fetch_optional, Param};
use crate::postgres::statements::{Statements, FORMAT};
use crate::record_row::RecordRow;

fn id_param(id: &RecordId) -> Param<'_> {
    Param::Bytes(&id.as_bytes()[..])
}

impl Dialect for Postgres {
    const STORE: &'static str = "postgres";
    const FORMAT: i16 = FORMAT;
    const LONGEST_NAME: usize = 63;
    const DEFAULT_TABLE: &'static str = "records";
    type Settings = PgSettings;
    type Sql = Statements;

    fn render(settings: &PgSettings, table: &str, trace_us: u64) -> Statements {
        Statements::new(&settings.schema, table, settings.persistent, trace_us)
    }

    /// One statement: the claim, or a read of the live record that refused
    /// it, by `kind`: `A` granted; `M` another fingerprint; `E` a trace; `R`
    /// completed; `I` in flight. No row when a concurrent first insert of
    /// the same key committed between the statement's snapshot and its
    /// insert: claim again.
    async fn claim(
        pool: &PgPool,
        sql: &Statements,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease_us: i64,
    ) -> Result<ClaimFound, sqlx::Error> {
        let Some(row) = fetch_optional(
            pool,
            sql.persistent,
            &sql.begin,
            &[
                id_param(id),
                Param::Bytes(&fingerprint.as_bytes()[..]),
                Param::Int(lease_us),
            ],
        )
        .await?
        else {
            return Ok(ClaimFound::Again);
        };
        let kind: String = row.try_get("kind")?;
        if kind == "A" {
            return Ok(ClaimFound::Granted(row.try_get("token")?));
        }
        Ok(ClaimFound::Found(row.found(kind != "M", kind != "E")?))
    }

    async fn complete(
        conn: &mut PgConnection,
        sql: &Statements,
        id: &RecordId,
        token: i64,
        ttl_us: i64,
        outcome: &[u8],
    ) -> Result<bool, sqlx::Error> {
        let params = [
            id_param(id),
            Param::Int(token),
            Param::Int(ttl_us),
            Param::Bytes(outcome),
        ];
        fetch_one(conn, sql.persistent, &sql.complete, &params)
            .await?
            .one()
    }

    async fn completed_by(
        conn: &mut PgConnection,
        sql: &Statements,
        id: &RecordId,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let params = [id_param(id), Param::Int(token)];
        let row = fetch_one(conn, sql.persistent, &sql.completed_by, &params).await?;
        row.try_get(0)
    }

    async fn release(
        pool: &PgPool,
        sql: &Statements,
        id: &RecordId,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let params = [id_param(id), Param::Int(token)];
        fetch_one(pool, sql.persistent, &sql.release, &params)
            .await?
            .one()
    }

    async fn renew(
        pool: &PgPool,
        sql: &Statements,
        id: &RecordId,
        token: i64,
        lease_us: i64,
    ) -> Result<bool, sqlx::Error> {
        let params = [id_param(id), Param::Int(token), Param::Int(lease_us)];
        let done = execute(pool, sql.persistent, &sql.renew, &params).await?;
        Ok(done.rows_affected() == 1)
    }

    async fn inspect(
        pool: &PgPool,
        sql: &Statements,
        id: &RecordId,
    ) -> Result<Option<Columns>, sqlx::Error> {
        let Some(row) = fetch_optional(pool, sql.persistent, &sql.inspect, &[id_param(id)]).await?
        else {
            return Ok(None);
        };
        row.record().map(Some)
    }

    /// One statement: the end, whether a live record was there, and its
    /// format, all read in one snapshot.
    async fn remove(
        pool: &PgPool,
        sql: &Statements,
        id: &RecordId,
        force: bool,
    ) -> Result<Ended, sqlx::Error> {
        let params = [id_param(id), Param::Bool(force)];
        let row = fetch_one(pool, sql.persistent, &sql.remove, &params).await?;
        Ok(Ended {
            ended: row.try_get::<i64, _>("ended")? > 0,
            live: row.try_get::<i64, _>("live")? > 0,
            format: row.try_get("format")?,
        })
    }

    /// From the deadline where the last purge stopped: a deleted row's index
    /// entries stay until a vacuum, and a scan from the start would walk
    /// them all again on every call (`purge_cursor.rs`).
    async fn purge(
        pool: &PgPool,
        sql: &Statements,
        limit: u32,
        from_us: i64,
    ) -> Result<Purged, sqlx::Error> {
        let params = [Param::Int(i64::from(limit)), Param::Int(from_us)];
        let row = fetch_one(pool, sql.persistent, &sql.purge, &params).await?;
        Ok(Purged {
            count: u64::try_from(row.try_get::<i64, _>("purged")?).unwrap_or(0),
            last_us: row.try_get("last_us")?,
        })
    }

    /// Creates the schema, table and index if they do not exist (an
    /// advisory lock orders instances that migrate at once), then checks
    /// that the table has every column the store reads.
    async fn migrate(pool: &PgPool, sql: &Statements) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(7300861234500001)")
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        for statement in &sql.migration {
            sqlx::raw_sql(AssertSqlSafe(statement.clone()))
                .execute(&mut *tx)
                .await?;
        }
        sqlx::raw_sql(AssertSqlSafe(sql.shape.clone()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    fn migration_sql(sql: &Statements) -> String {
        sql.migration.join(";\n") + ";\n"
    }

    fn error(what: &str, e: sqlx::Error) -> StoreError {
        store_error(what, e)
    }

    fn notifies(settings: &PgSettings) -> bool {
        !matches!(settings.listen, Listen::Off)
    }

    async fn listen(pool: PgPool, settings: PgSettings, sql: Arc<Statements>, heard: Listener) {
        pg_listener::listen(pool, settings.listen, &sql.channel, &heard).await;
    }

    /// Marks the record `waiting`: its completion, release or removal then
    /// notifies the channel (only then: a `NOTIFY` serializes commits,
    /// which every request would otherwise pay).
    async fn watch(pool: &PgPool, sql: &Statements, id: &RecordId) -> Result<bool, sqlx::Error> {
        let marked = execute(pool, sql.persistent, &sql.watch, &[id_param(id)]).await?;
        Ok(marked.rows_affected() == 1)
    }
}
