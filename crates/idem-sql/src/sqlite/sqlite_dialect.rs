//! SQLite as a [`Dialect`]: each call one statement (a refused claim, and a
//! removal that changed nothing, a read after it), and transactions that
//! take the write lock when they begin.

use std::sync::Arc;

use idem_core::{Fingerprint, RecordId, StoreError};
use sqlx::sqlite::{SqliteArguments, SqlitePool};
use sqlx::{AssertSqlSafe, Pool, Row, Sqlite, Transaction};

use crate::dialect::{ClaimFound, Dialect};
use crate::prepared_calls::prepared_calls;
use crate::record_row::RecordRow;
use crate::sqlite::sqlite_error;
use crate::sqlite::statements::{Statements, FORMAT};

fn prepared(statement: &Arc<str>) -> sqlx::query::Query<'_, Sqlite, SqliteArguments> {
    sqlx::query(AssertSqlSafe(Arc::clone(statement)))
}

impl Dialect for Sqlite {
    const STORE: &'static str = "sqlite";
    const FORMAT: i16 = FORMAT;
    const LONGEST_NAME: usize = 64;
    const ONE_WRITER: bool = true;
    type Settings = ();
    type Sql = Statements;

    fn render((): &(), table: &str, trace_us: u64) -> Statements {
        Statements::new(table, trace_us)
    }

    /// `BEGIN IMMEDIATE`: the write lock from the start, so that a
    /// transaction that read first never fails to write later
    /// (`SQLITE_BUSY` on upgrading a read), and waits its turn for the
    /// busy timeout instead.
    async fn begin_writes(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        pool.begin_with("BEGIN IMMEDIATE").await
    }

    async fn claim(
        pool: &SqlitePool,
        sql: &Statements,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease_us: i64,
    ) -> Result<ClaimFound, sqlx::Error> {
        let granted = prepared(&sql.claim)
            .bind(&id.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(lease_us)
            .fetch_optional(pool)
            .await?;
        if let Some(row) = granted {
            return Ok(ClaimFound::Granted(row.try_get(0)?));
        }
        let Some(row) = prepared(&sql.claimed)
            .bind(&id.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .fetch_optional(pool)
            .await?
        else {
            return Ok(ClaimFound::Again);
        };
        let (same, live) = (row.try_get("same")?, row.try_get("live")?);
        Ok(ClaimFound::Found(row.found(same, live)?))
    }

    prepared_calls!();

    async fn migrate(pool: &Pool<Sqlite>, sql: &Statements) -> Result<(), sqlx::Error> {
        // In a transaction that takes the write lock: a database that
        // cannot be written fails here, at start, even when the table is
        // there already.
        let mut tx = Self::begin_writes(pool).await?;
        for statement in &sql.migration {
            sqlx::query(AssertSqlSafe(statement.clone()))
                .execute(&mut *tx)
                .await?;
        }
        prepared(&sql.shape).execute(&mut *tx).await?;
        tx.commit().await
    }

    fn migration_sql(sql: &Statements) -> String {
        sql.migration.join(";\n") + ";\n"
    }

    fn error(what: &str, e: sqlx::Error) -> StoreError {
        sqlite_error::store_error(what, e)
    }
}
