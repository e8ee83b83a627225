//! # idem-sql
//!
//! The SQL store of idem, written once over [sqlx](https://docs.rs/sqlx):
//! [`SqlStore`] is the [`Store`](idem_core::Store), [`SqlTransaction`] the
//! operation's own transaction in which its record completes, and each
//! database is a [`Dialect`] that supplies only its statements, its clock,
//! its error mapping and how it is set up.
//!
//! The dialects, each behind a feature of its name: `sqlite` (SQLite,
//! bundled) and `mysql` (MariaDB and MySQL).

mod dialect;
mod local_wakes;
#[cfg(feature = "mysql")]
pub mod mysql;
mod names;
mod sql_store;
mod sql_transaction;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod transitions;
mod turns;

pub use dialect::{Claimed, Columns, Dialect, Ended, Found};
pub use names::InvalidName;
pub use sql_store::{SqlStore, DEFAULT_TRACE};
pub use sql_transaction::SqlTransaction;
