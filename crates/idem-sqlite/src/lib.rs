//! # idem-sqlite
//!
//! A [`Store`](idem_sql::SqlStore) for idem on SQLite: durable records
//! with nothing to install, in a file of the service's own, and effects
//! committed in the same transaction as their record. One store of the SQL
//! core [`idem_sql`], with its SQLite dialect; see
//! [`idem_sql::sqlite`] for what it promises.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = idem_sqlite::SqliteStore::open("payments.db").await?;
//! # Ok(())
//! # }
//! ```

pub use idem_sql::sqlite::{
    OpenError, SqliteStore, SqliteTransaction, Statements, DEFAULT_BUSY_TIMEOUT,
};
pub use idem_sql::{InvalidName, DEFAULT_TRACE};
