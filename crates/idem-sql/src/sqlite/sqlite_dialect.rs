//! SQLite as a [`Dialect`]: each call one statement (a refused claim, and a
//! removal that changed nothing, a read after it), and transactions that
//! take the write lock when they begin.

use std::sync::Arc;

use idem_core::{async_trait, Fingerprint, RecordId, StoreError};
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqlitePool};
use sqlx::{AssertSqlSafe, Pool, Row, Sqlite, Transaction};

use crate::dialect::{Claimed, Columns, Dialect, Ended, Found};
use crate::sqlite::sqlite_error;
use crate::sqlite::statements::{Statements, FORMAT};

fn prepared(statement: &Arc<str>) -> sqlx::query::Query<'_, Sqlite, SqliteArguments> {
    sqlx::query(AssertSqlSafe(Arc::clone(statement)))
}

#[async_trait]
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
    ) -> Result<Claimed, sqlx::Error> {
        let granted = prepared(&sql.claim)
            .bind(&id.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(lease_us)
            .fetch_optional(pool)
            .await?;
        if let Some(row) = granted {
            return Ok(Claimed::Granted(row.try_get(0)?));
        }
        let Some(row) = prepared(&sql.claimed)
            .bind(&id.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .fetch_optional(pool)
            .await?
        else {
            return Ok(Claimed::Again);
        };
        Ok(Claimed::Found(Found {
            same: row.try_get("same")?,
            live: row.try_get("live")?,
            completed: row.try_get("completed")?,
            outcome: row.try_get("outcome")?,
            left_us: row.try_get("left_us")?,
            format: row.try_get("format")?,
        }))
    }

    async fn complete(
        conn: &mut SqliteConnection,
        sql: &Statements,
        id: &RecordId,
        token: i64,
        ttl_us: i64,
        outcome: &[u8],
    ) -> Result<bool, sqlx::Error> {
        let done = prepared(&sql.complete)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .bind(ttl_us)
            .bind(outcome)
            .execute(conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn completed_by(
        conn: &mut SqliteConnection,
        sql: &Statements,
        id: &RecordId,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let row = prepared(&sql.completed_by)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .fetch_one(conn)
            .await?;
        Ok(row.try_get::<i64, _>(0)? == 1)
    }

    async fn release(
        pool: &SqlitePool,
        sql: &Statements,
        id: &RecordId,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = prepared(&sql.release)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .execute(pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn renew(
        pool: &SqlitePool,
        sql: &Statements,
        id: &RecordId,
        token: i64,
        lease_us: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = prepared(&sql.renew)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .bind(lease_us)
            .execute(pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn inspect(
        pool: &SqlitePool,
        sql: &Statements,
        id: &RecordId,
    ) -> Result<Option<Columns>, sqlx::Error> {
        let Some(row) = prepared(&sql.inspect)
            .bind(&id.as_bytes()[..])
            .fetch_optional(pool)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Columns {
            fingerprint: row.try_get("fingerprint")?,
            token: row.try_get("token")?,
            completed: row.try_get("completed")?,
            outcome: row.try_get("outcome")?,
            left_us: row.try_get("left_us")?,
            format: row.try_get("format")?,
        }))
    }

    async fn remove(
        pool: &SqlitePool,
        sql: &Statements,
        id: &RecordId,
        force: bool,
    ) -> Result<Ended, sqlx::Error> {
        let ended = prepared(&sql.remove)
            .bind(&id.as_bytes()[..])
            .bind(force)
            .execute(pool)
            .await?;
        if ended.rows_affected() == 1 {
            return Ok(Ended {
                ended: true,
                live: true,
                format: FORMAT,
            });
        }
        let row = prepared(&sql.live)
            .bind(&id.as_bytes()[..])
            .fetch_one(pool)
            .await?;
        Ok(Ended {
            ended: false,
            live: row.try_get::<i64, _>(0)? > 0,
            format: row.try_get(1)?,
        })
    }

    async fn purge(pool: &SqlitePool, sql: &Statements, limit: u32) -> Result<u64, sqlx::Error> {
        prepared(&sql.purge)
            .bind(limit)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
    }

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
