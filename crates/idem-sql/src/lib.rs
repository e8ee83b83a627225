//! # idem-sql
//!
//! The SQL store of idem, written once over [sqlx](https://docs.rs/sqlx):
//! [`SqlStore`] is the [`Store`](idem_core::Store), [`SqlTransaction`] the
//! operation's own transaction in which its record completes, and each
//! database is a [`Dialect`] that supplies only its statements, its clock,
//! its error mapping and how it is set up.
//!
//! The dialects, each behind a feature of its name: `postgres`
//! (PostgreSQL), `mysql` (MariaDB and MySQL) and `sqlite` (SQLite,
//! bundled).

mod dialect;
#[cfg(feature = "mysql")]
pub mod mysql;
mod names;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "mysql", feature = "sqlite"))]
mod prepared_calls;
mod purge_cursor;
mod record_row;
mod sql_store;
mod sql_transaction;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod transitions;
mod turns;
mod wakes;

pub use dialect::{ClaimFound, Columns, Dialect, Ended, Found, Heard, Listener, Purged};
pub use names::InvalidName;
pub use record_row::RecordRow;
pub use sql_store::{SqlStore, DEFAULT_TRACE};
pub use sql_transaction::SqlTransaction;
