//! `-- sqlite`: the payments debit on SQLite, idem (`SqliteStore`, each
//! debit committed with its record by `commit_response`) against the same
//! handler doing the least design with the same settings (`INSERT OR
//! IGNORE` to claim the key, the debit in its own transaction, `UPDATE` to
//! record the response), each in a file of its own in the same directory
//! (WAL, `synchronous = FULL`, as `SqliteStore::open` sets them); the least
//! design on one connection, its writers queued in order (with more, they
//! sleep in SQLite's busy handler: half the rate).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::payments::router;
use idem_examples::sqlite_ledger::SqliteLedger;
use idem_sqlite::SqliteStore;

use crate::naive::{naive_router, Naive, NaiveKeys};
use crate::{app_with, compare};

#[derive(Clone)]
struct SqliteKeys {
    pool: sqlx::SqlitePool,
}

impl NaiveKeys for SqliteKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        sqlx::query("INSERT OR IGNORE INTO naive_keys (k) VALUES (?1)")
            .bind(key)
            .execute(&self.pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(|e| e.to_string())
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        sqlx::query("UPDATE naive_keys SET response = ?1 WHERE k = ?2")
            .bind(response)
            .bind(key)
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn recorded(&self, key: &str) -> Result<Option<bytes::Bytes>, String> {
        let row: Option<(Option<Vec<u8>>,)> =
            sqlx::query_as("SELECT response FROM naive_keys WHERE k = ?1")
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
        Ok(row.and_then(|(r,)| r).map(bytes::Bytes::from))
    }
}

/// The run's files, idem's and the least design's.
fn files() -> [PathBuf; 2] {
    ["idem", "least"].map(|who| idem_tests::sqlite_path(&format!("bench-{who}")))
}

async fn ledger_on(path: &PathBuf) -> Result<(SqliteStore, SqliteLedger), String> {
    let store = SqliteStore::open(path).await.map_err(|e| e.to_string())?;
    ledger_of(store).await
}

async fn ledger_of(store: SqliteStore) -> Result<(SqliteStore, SqliteLedger), String> {
    let ledger = SqliteLedger::new(store.clone());
    ledger.migrate().await.map_err(|e| e.to_string())?;
    Ok((store, ledger))
}

async fn pair(files: &[PathBuf; 2]) -> Result<(String, String), String> {
    let (store, ledger) = ledger_on(&files[0]).await?;
    // The least design's file: the same settings, its own keys table, and
    // one connection, so that its writers queue in order rather than sleep
    // in SQLite's busy handler (as idem's take turns).
    let one = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&files[1])
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                .busy_timeout(idem_sqlite::DEFAULT_BUSY_TIMEOUT),
        )
        .await
        .map_err(|e| e.to_string())?;
    let (least, least_ledger) = ledger_of(SqliteStore::new(one)).await?;
    sqlx::query("CREATE TABLE naive_keys (k TEXT PRIMARY KEY, response BLOB)")
        .execute(least.pool())
        .await
        .map_err(|e| e.to_string())?;
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
    let naive = naive_router(Naive {
        app: app_with(Engine::new(MemoryStore::new()), Arc::new(least_ledger)),
        keys: SqliteKeys {
            pool: least.pool().clone(),
        },
    });
    Ok((
        idem_tests::serve(naive).await,
        idem_tests::serve(router(app_with(engine, Arc::new(ledger)))).await,
    ))
}

/// Runs the pair, then deletes the run's files.
pub(crate) fn run(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let files = files();
    let (naive, idem) = rt.block_on(pair(&files))?;
    let compared = compare(
        "sqlite",
        [
            "INSERT OR IGNORE + UPDATE (baseline)",
            "with idem (SqliteStore)",
        ],
        [&naive, &idem],
        script,
        None,
    );
    for file in &files {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
    }
    compared
}
