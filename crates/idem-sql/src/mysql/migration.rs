//! What `migrate` does to a table made by an earlier version.

use sqlx::mysql::MySqlPool;
use sqlx::AssertSqlSafe;

use crate::mysql::mysql_error::{error_number, number};

/// Adds the `format` column to a table made before records named their
/// format (every row in it is of format 1). MySQL 8.0 has no `ADD COLUMN
/// IF NOT EXISTS`: the column is looked for first, and an instance that
/// adds it at the same time as another finds it added (1060).
pub(crate) async fn add_format_column(
    pool: &MySqlPool,
    database: Option<&str>,
    table: &str,
    quoted: &str,
) -> Result<(), sqlx::Error> {
    let found: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? \
           AND COLUMN_NAME = 'format'",
    )
    .bind(database)
    .bind(table)
    .fetch_one(pool)
    .await?;
    if found > 0 {
        return Ok(());
    }
    match sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER TABLE {quoted} ADD COLUMN format SMALLINT NOT NULL DEFAULT 1"
    )))
    .execute(pool)
    .await
    {
        Err(e) if error_number(&e) == Some(number::DUPLICATE_COLUMN) => Ok(()),
        other => other.map(|_| ()),
    }
}
