//! `-- mariadb`: the payments debit on MariaDB, idem (`MySqlStore`, each
//! debit committed with its record by `commit_response`) against the same
//! handler doing the least design on the same server (`INSERT IGNORE` to
//! claim the key, the debit in its own transaction, `UPDATE` to record the
//! response).

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::mysql_ledger::MySqlLedger;
use idem_examples::payments::router;
use idem_mysql::MySqlStore;

use crate::naive::{naive_router, Naive, NaiveKeys};
use crate::{app_with, compare};

#[derive(Clone)]
struct MySqlKeys {
    pool: sqlx::MySqlPool,
    claim_sql: Arc<str>,
    record_sql: Arc<str>,
    recorded_sql: Arc<str>,
}

impl NaiveKeys for MySqlKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&self.claim_sql)))
            .bind(key)
            .execute(&self.pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(|e| e.to_string())
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&self.record_sql)))
            .bind(response)
            .bind(key)
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn recorded(&self, key: &str) -> Result<Option<bytes::Bytes>, String> {
        let row: Option<(Option<Vec<u8>>,)> =
            sqlx::query_as(sqlx::AssertSqlSafe(Arc::clone(&self.recorded_sql)))
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
        Ok(row.and_then(|(r,)| r).map(bytes::Bytes::from))
    }
}

/// The run's tables: `idem_bench_<pid>_...`.
fn prefix() -> String {
    format!("idem_bench_{}_", std::process::id())
}

async fn pair() -> Result<(String, String), String> {
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(32)
        .connect(&idem_tests::mysql_url())
        .await
        .map_err(|e| format!("MariaDB at {}: {e}", idem_tests::mysql_url()))?;
    let p = prefix();
    let store = MySqlStore::new(pool.clone())
        .with_table(&format!("{p}records"))
        .map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let ledger = MySqlLedger::new(store.clone(), &format!("{p}accounts"));
    ledger.migrate().await.map_err(|e| e.to_string())?;
    let naive_ledger = MySqlLedger::new(store.clone(), &format!("{p}naive_accounts"));
    naive_ledger.migrate().await.map_err(|e| e.to_string())?;
    let keys = format!("`{p}naive_keys`");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {keys} (k VARCHAR(255) PRIMARY KEY, response LONGBLOB) ENGINE = InnoDB"
    )))
    .execute(&pool)
    .await
    .map_err(|e| e.to_string())?;
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
    let naive = naive_router(Naive {
        app: app_with(Engine::new(MemoryStore::new()), Arc::new(naive_ledger)),
        keys: MySqlKeys {
            pool,
            claim_sql: format!("INSERT IGNORE INTO {keys} (k) VALUES (?)").into(),
            record_sql: format!("UPDATE {keys} SET response = ? WHERE k = ?").into(),
            recorded_sql: format!("SELECT response FROM {keys} WHERE k = ?").into(),
        },
    });
    Ok((
        idem_tests::serve(naive).await,
        idem_tests::serve(router(app_with(engine, Arc::new(ledger)))).await,
    ))
}

async fn cleanup() -> Result<(), sqlx::Error> {
    let pool = idem_tests::mysql_pool(1).await;
    let p = prefix();
    for t in ["records", "accounts", "naive_accounts", "naive_keys"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS `{p}{t}`"
        )))
        .execute(&pool)
        .await?;
    }
    Ok(())
}

/// Runs the pair, then drops the run's tables.
pub(crate) fn run(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let (naive, idem) = rt.block_on(pair())?;
    let compared = compare(
        "mariadb",
        [
            "INSERT IGNORE + UPDATE (baseline)",
            "with idem (MySqlStore)",
        ],
        [&naive, &idem],
        script,
        Some("mariadbd"),
    );
    if let Err(e) = rt.block_on(cleanup()) {
        eprintln!("  could not drop the run's tables: {e}");
    }
    compared
}
