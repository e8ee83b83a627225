//! MariaDB and MySQL (InnoDB): records that survive a cache flush, and
//! exactly-once effects, because a record can complete **in the same
//! transaction as the business writes** (`begin_transaction` and
//! [`Claim::commit`](idem_core::Claim::commit)).
//!
//! - `begin` is one atomic statement, `INSERT ... ON DUPLICATE KEY UPDATE`,
//!   that claims a new or no-longer-live record and leaves a live one as it
//!   is; the token it granted comes back as the statement's insert id
//!   (`LAST_INSERT_ID(expr)`), so a first request costs one round trip, and
//!   only a duplicate reads the record after it. Not `SELECT ... FOR
//!   UPDATE` then `INSERT`: under REPEATABLE READ two first requests for one
//!   new key both take the gap's lock (gap locks do not conflict), then both
//!   insert, and the server kills one as a deadlock.
//! - `complete`, `release` and `renew` are one `UPDATE` each, matching the
//!   fencing token.
//! - Time is the server's clock (`UTC_TIMESTAMP(6)`, microseconds).
//! - MySQL has no `LISTEN`: a duplicate that waits polls, and is woken at
//!   once when the completion happens in its own process.
//!
//! The SQL is the common ground of MariaDB 10.5+ and MySQL 8.0: no
//! `RETURNING`, no `VALUES()` in the upsert, no row alias, no user
//! variables, no multi-statement batches.

mod migration;
mod mysql_dialect;
mod mysql_error;
mod mysql_store;
mod statements;

pub use mysql_store::{MySqlStore, MySqlTransaction, DEFAULT_TABLE};
pub use statements::Statements;
