//! MariaDB and MySQL as a [`Dialect`]: each call one prepared statement (a
//! claim that granted no token, and a removal that changed nothing, a read
//! after it).

use std::sync::Arc;

use idem_core::{Fingerprint, RecordId, StoreError};
use sqlx::mysql::{MySqlArguments, MySqlPool};
use sqlx::{AssertSqlSafe, MySql, Row};

use crate::dialect::{ClaimFound, Dialect};
use crate::mysql::migration;
use crate::mysql::mysql_error::{error_number, number, store_error};
use crate::mysql::statements::{Statements, FORMAT};
use crate::prepared_calls::prepared_calls;
use crate::record_row::RecordRow;

fn prepared(statement: &Arc<str>) -> sqlx::query::Query<'_, MySql, MySqlArguments> {
    sqlx::query(AssertSqlSafe(Arc::clone(statement)))
}

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
    ) -> Result<ClaimFound, sqlx::Error> {
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
            Err(e) if error_number(&e) == Some(number::DEADLOCK) => return Ok(ClaimFound::Again),
            Err(e) => return Err(e),
        };
        if token != 0 {
            return Ok(ClaimFound::Granted(
                i64::try_from(token).unwrap_or(i64::MAX),
            ));
        }
        let Some(row) = prepared(&sql.claimed)
            .bind(&fingerprint.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(&id.as_bytes()[..])
            .fetch_optional(pool)
            .await?
        else {
            // Ended (or purged) between the claim and its read.
            return Ok(ClaimFound::Again);
        };
        let (same, live) = (
            row.try_get::<i64, _>("same")? != 0,
            row.try_get::<i64, _>("live")? != 0,
        );
        Ok(ClaimFound::Found(row.found(same, live)?))
    }

    prepared_calls!();

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
