//! SQLite: a durable store with nothing to install, in a file of its own
//! (the library is bundled). [`SqliteStore::open`] is all a service needs:
//!
//! - **WAL**, so readers never wait for the writer, and a **busy timeout**
//!   (5 s): a write waits its turn that long, then fails as transient
//!   (HTTP 503 with `Retry-After`; nothing was run).
//! - **The claim** is one statement (`INSERT ... ON CONFLICT DO UPDATE ...
//!   WHERE` the record is not live `RETURNING` the token), and SQLite runs one
//!   writer at a time, so exactly one of any number of duplicates, in any
//!   number of processes on the file, runs each key. Tokens come from the
//!   host's clock and grow with every takeover (fencing).
//! - **Effects committed with their record**: [`SqliteStore::begin_transaction`]
//!   opens `BEGIN IMMEDIATE` for the operation's writes, and
//!   [`Claim::commit`](idem_core::Claim::commit) completes the record in it.
//! - **Waiting duplicates** in this process are woken when it changes the
//!   record; other processes' changes are found by polling.
//!
//! ```no_run
//! use idem_core::Engine;
//! use idem_sql::sqlite::SqliteStore;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteStore::open("payments.db").await?;
//! let engine = Engine::new(store.clone());
//! # Ok(())
//! # }
//! ```

mod sqlite_dialect;
mod sqlite_error;
mod sqlite_store;
mod statements;

pub use sqlite_store::{OpenError, SqliteStore, SqliteTransaction, DEFAULT_BUSY_TIMEOUT};
pub use statements::Statements;
