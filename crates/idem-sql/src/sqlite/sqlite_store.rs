//! `SqliteStore`: the SQL store on SQLite, and how it opens a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Sqlite;

use crate::sql_store::SqlStore;
use crate::sql_transaction::SqlTransaction;
use crate::sqlite::sqlite_error::{code, primary_code};

/// The store on SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

/// The operation's own transaction on SQLite
/// ([`SqliteStore::begin_transaction`]).
pub type SqliteTransaction = SqlTransaction<Sqlite>;

/// How long a write waits for another connection's (or process's) by
/// default before it fails as transient.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a SQLite store could not be opened: which file, and what is wrong
/// with it.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the idem store in {path}: {why}")]
pub struct OpenError {
    path: PathBuf,
    why: String,
    #[source]
    source: Option<sqlx::Error>,
}

impl OpenError {
    fn new(path: &Path, why: impl Into<String>, source: Option<sqlx::Error>) -> Self {
        Self {
            path: path.to_owned(),
            why: why.into(),
            source,
        }
    }

    /// `e`, met opening or migrating `path`, said plainly.
    fn from_sqlx(path: &Path, e: sqlx::Error) -> Self {
        let why = match primary_code(&e) {
            Some(code::READONLY) => {
                "the database cannot be written (a read-only file or directory)".to_owned()
            }
            Some(code::CANTOPEN) => {
                "SQLite cannot open the file (a directory, or no permission)".to_owned()
            }
            Some(code::NOTADB | code::CORRUPT) => {
                "the file is not a SQLite database, or is damaged".to_owned()
            }
            Some(code::BUSY | code::LOCKED) => {
                "the database stayed locked past the busy timeout".to_owned()
            }
            Some(code::FULL) => "the disk is full".to_owned(),
            Some(code::ERROR) => format!(
                "its records table was not made by SqliteStore::migrate ({}); use another table \
                 (with_table) or another file",
                database_message(&e)
            ),
            _ => e.to_string(),
        };
        Self::new(path, why, Some(e))
    }
}

fn database_message(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => db.message().to_owned(),
        e => e.to_string(),
    }
}

impl SqlStore<Sqlite> {
    /// Opens (creating it if missing) the database file `path` with the
    /// store's settings: WAL, a busy timeout of [`DEFAULT_BUSY_TIMEOUT`],
    /// `synchronous = FULL` (a committed record survives a power loss, not
    /// only a crash), and migrates its table. Fails, saying which, on a
    /// missing directory, a file that cannot be written, a file that is not
    /// a database, or a table of the same name made by something else.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(DEFAULT_BUSY_TIMEOUT);
        Self::open_with(options).await
    }

    /// [`open`](Self::open) with your own connection options (take
    /// `SqliteConnectOptions::new().filename(..)` and set what you need; a
    /// journal mode other than WAL makes readers wait for the writer).
    pub async fn open_with(options: SqliteConnectOptions) -> Result<Self, OpenError> {
        let path = options.get_filename().to_owned();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(OpenError::new(
                    &path,
                    format!("its directory {} does not exist", dir.display()),
                    None,
                ));
            }
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .map_err(|e| OpenError::from_sqlx(&path, e))?;
        let store = Self::new(pool);
        store
            .migrate()
            .await
            .map_err(|e| OpenError::from_sqlx(&path, e))?;
        Ok(store)
    }
}
