//! The MariaDB (or MySQL) the tests use: its URL, pools, and a migrated
//! store in a table of its own.

use std::time::Duration;

use crate::unique::unique_suffix;

/// The MariaDB database the tests use (`IDEM_TEST_MYSQL_URL`, default the
/// local `test` database as `root`).
pub fn mysql_url() -> String {
    std::env::var("IDEM_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// A table name no other test, process or run uses: `idem_t_<unix secs>_<...>`.
pub fn unique_table() -> String {
    format!("idem_t_{}", unique_suffix())
}

/// A pool on the test database.
pub async fn mysql_pool(max_connections: u32) -> sqlx::MySqlPool {
    sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&mysql_url())
        .await
        .expect("MariaDB at IDEM_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/test)")
}

/// A migrated `MySqlStore` in a table of its own. Test tables older than an
/// hour (left by earlier runs) are dropped on the way.
pub async fn mysql_store() -> idem_mysql::MySqlStore {
    mysql_store_on(mysql_pool(8).await).await
}

/// A migrated `MySqlStore` on `pool`, in a table of its own.
pub async fn mysql_store_on(pool: sqlx::MySqlPool) -> idem_mysql::MySqlStore {
    drop_stale_tables(&pool).await;
    let store = idem_mysql::MySqlStore::new(pool)
        .with_table(&unique_table())
        .expect("valid table name");
    store.migrate().await.expect("migration");
    store
}

async fn drop_stale_tables(pool: &sqlx::MySqlPool) {
    let cutoff = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(3600);
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    for name in names {
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s < cutoff)
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP TABLE IF EXISTS `{name}`"
            )))
            .execute(pool)
            .await;
        }
    }
}
