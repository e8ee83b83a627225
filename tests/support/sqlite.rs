//! SQLite stores for tests: each in a database file of its own, under the
//! system's temporary directory.

use std::path::PathBuf;

use crate::unique::unique_suffix;

/// A path for a new database file no other test, process or run uses.
pub fn sqlite_path(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("idem-tests-sqlite");
    std::fs::create_dir_all(&dir).expect("a directory for the test databases");
    dir.join(format!("{label}_{}.db", unique_suffix()))
}

/// A migrated `SqliteStore` in a file of its own.
pub async fn sqlite_store() -> idem_sqlite::SqliteStore {
    let path = sqlite_path("store");
    idem_sqlite::SqliteStore::open(&path)
        .await
        .unwrap_or_else(|e| panic!("a SQLite store in {}: {e}", path.display()))
}
