//! PostgreSQL: records that survive a cache flush, and exactly-once
//! effects, because a record can complete **in the same transaction as the
//! business writes** (`begin_transaction` and
//! [`Claim::commit`](idem_core::Claim::commit)).
//!
//! - `begin` is one statement (`INSERT ... ON CONFLICT DO UPDATE ... WHERE`
//!   the old record is no longer live, with a read of the live one in the
//!   same statement); it takes over an expired lease atomically.
//! - `complete`, `release` and `renew` are one `UPDATE` each, matching the
//!   fencing token.
//! - Time is the server's clock (`clock_timestamp()`).
//! - A duplicate that waits is woken by `LISTEN`/`NOTIFY`, from any
//!   process; behind a transaction pooler without a direct connection for
//!   it, it polls.
//! - The purge goes on from where it stopped (a deleted row's index entries
//!   stay until a vacuum).

mod pg_dialect;
mod pg_error;
mod pg_listener;
mod pg_store;
mod sending;
mod statements;

pub use pg_store::{PgSettings, PgStore, PgTransaction, DEFAULT_SCHEMA, DEFAULT_TABLE};
pub use statements::Statements;
