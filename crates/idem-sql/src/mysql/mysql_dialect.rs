//! MariaDB and MySQL as a [`Dialect`]: each call one prepared statement (a
//! claim that granted no token, and a removal that changed nothing, a read
//! after it).

use std::sync::Arc;

use idem_core::{async_trait, Fingerprint, RecordId, StoreError};
use sqlx::mysql::{MySqlArguments, MySqlConnection, MySqlPool};
use sqlx::{AssertSqlSafe, MySql, Row};

use crate::dialect::{Claimed, Columns, Dialect, Ended, Found};
use crate::mysql::migration;
use crate::mysql::mysql_error::{error_number, number, store_error};
use crate::mysql::statements::{Statements, FORMAT};

fn prepared(statement: &Arc<str>) -> sqlx::query::Query<'_, MySql, MySqlArguments> {
    sqlx::query(AssertSqlSafe(Arc::clone(statement)))
}

#[async_trait]
impl Dialect for MySql {
    const STORE: &'static str = "mysql";
    const FORMAT: i16 = FORMAT;
    const LONGEST_NAME: usize = 64;
    /// The database the table is in, if not the pool's.
    type Settings = Option<Arc<str>>;
    type Sql = Statements;

    fn render(database: &Option<Arc<str>>, table: &str, trace_us: u64) -> Statements {
        Statements::new(database.as_deref(), table, trace_us)
    }

    /// One statement for a first request (the claim, whose insert id is the
    /// token it granted), and a read after it when the record was live or
    /// traced, to tell in flight, replay, expired and mismatch apart.
    async fn claim(
        pool: &MySqlPool,
        sql: &Statements,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease_us: i64,
    ) -> Result<Claimed, sqlx::Error> {
        let claimed = prepared(&sql.claim)
            .bind(&id.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(lease_us)
            .bind(&fingerprint.as_bytes()[..])
            .bind(lease_us)
            .execute(pool)
            .await;
        let token = match claimed {
            Ok(done) => done.last_insert_id(),
            // Rolled back whole: nothing was claimed. Send it again.
            Err(e) if error_number(&e) == Some(number::DEADLOCK) => return Ok(Claimed::Again),
            Err(e) => return Err(e),
        };
        if token != 0 {
            return Ok(Claimed::Granted(i64::try_from(token).unwrap_or(i64::MAX)));
        }
        let Some(row) = prepared(&sql.claimed)
            .bind(&fingerprint.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(&id.as_bytes()[..])
            .fetch_optional(pool)
            .await?
        else {
            // Ended (or purged) between the claim and its read.
            return Ok(Claimed::Again);
        };
        Ok(Claimed::Found(Found {
            same: row.try_get::<i64, _>("same")? != 0,
            live: row.try_get::<i64, _>("live")? != 0,
            completed: row.try_get("completed")?,
            outcome: row.try_get("outcome")?,
            left_us: row.try_get("left_us")?,
            format: row.try_get("format")?,
        }))
    }

    async fn complete(
        conn: &mut MySqlConnection,
        sql: &Statements,
        id: &RecordId,
        token: i64,
        ttl_us: i64,
        outcome: &[u8],
    ) -> Result<bool, sqlx::Error> {
        let done = prepared(&sql.complete)
            .bind(ttl_us)
            .bind(outcome)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .execute(conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn completed_by(
        conn: &mut MySqlConnection,
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
        pool: &MySqlPool,
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
        pool: &MySqlPool,
        sql: &Statements,
        id: &RecordId,
        token: i64,
        lease_us: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = prepared(&sql.renew)
            .bind(lease_us)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .execute(pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn inspect(
        pool: &MySqlPool,
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

    /// Two statements: the end, and, when it changed nothing, whether the
    /// record is live (in flight, refused) or not (absent); each answer is
    /// what the record was at one of the two.
    async fn remove(
        pool: &MySqlPool,
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

    async fn purge(pool: &MySqlPool, sql: &Statements, limit: u32) -> Result<u64, sqlx::Error> {
        prepared(&sql.purge)
            .bind(limit)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
    }

    /// Creates the table and its index if they do not exist, adds what an
    /// earlier version's table lacks, then checks that the table has every
    /// column the store reads.
    async fn migrate(pool: &MySqlPool, sql: &Statements) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(AssertSqlSafe(sql.migration.clone()))
            .execute(pool)
            .await?;
        migration::add_format_column(pool, sql.database.as_deref(), &sql.table, &sql.quoted)
            .await?;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SELECT id, fingerprint, token, completed, deadline, outcome, format \
             FROM {} LIMIT 0",
            sql.quoted
        )))
        .execute(pool)
        .await?;
        Ok(())
    }

    /// A table made by a version before records named their format also
    /// needs `ALTER TABLE <table> ADD COLUMN format SMALLINT NOT NULL
    /// DEFAULT 1` (`migrate` adds it itself).
    fn migration_sql(sql: &Statements) -> String {
        format!("{};\n", sql.migration)
    }

    fn error(what: &str, e: sqlx::Error) -> StoreError {
        store_error(what, e)
    }
}
