//! # idem-mysql
//!
//! A [`Store`](idem_core::Store) for idem on MariaDB and MySQL (InnoDB), the
//! SQL store of [`idem_sql`] with its MySQL dialect: records that survive a
//! cache flush, and exactly-once effects, because a record can complete **in
//! the same transaction as the business writes**
//! ([`MySqlStore::begin_transaction`] and
//! [`Claim::commit`](idem_core::Claim::commit)): either both commit or
//! neither does, and a holder that lost its claim commits nothing.
//!
//! - `begin` is one atomic statement, `INSERT ... ON DUPLICATE KEY UPDATE`,
//!   that claims a new or no-longer-live record and leaves a live one as it
//!   is; the token it granted comes back as the statement's insert id
//!   (`LAST_INSERT_ID(expr)`), so a first request costs one round trip, and
//!   only a duplicate reads the record after it. Not `SELECT ... FOR
//!   UPDATE` then `INSERT`: under REPEATABLE READ
//!   two first requests for one new key both take the gap's lock (gap locks
//!   do not conflict), then both insert, and the server kills one as a
//!   deadlock.
//! - `complete`, `release` and `renew` are one `UPDATE` each, matching the
//!   fencing token; a holder whose lease ran out or was taken over changes
//!   nothing and gets `LeaseLost`.
//! - Time is the server's clock (`UTC_TIMESTAMP(6)`, microseconds), never
//!   the application's; keys are stored as their SHA-256 (the
//!   [`RecordId`](idem_core::RecordId)), never as sent.
//! - The schema ships with the crate ([`MySqlStore::migrate`], safe to run
//!   twice and concurrently; or take [`MySqlStore::migration_sql`] into your
//!   own migration tool).
//! - Expired records are purged in bounded batches
//!   ([`MySqlStore::purge_expired`]), optionally by a background task
//!   ([`MySqlStore::spawn_purger`]).
//! - MySQL has no `LISTEN`: a duplicate that waits polls, with pauses from
//!   5 ms growing to 250 ms, and is woken at once when the completion
//!   happens in its own process.
//!
//! Tested on MariaDB 10.11. The SQL is the common ground of MariaDB 10.5+
//! and MySQL 8.0: no `RETURNING`, no `VALUES()` in the upsert (deprecated in
//! MySQL 8.0.20), no row alias (absent from MariaDB), no user variables, no
//! multi-statement batches.
//!
//! ```no_run
//! use idem_core::{encode_result, Call, Engine, Failure, Fingerprint, IdempotencyKey};
//! use idem_mysql::MySqlStore;
//!
//! #[derive(Debug, serde::Serialize, serde::Deserialize)]
//! struct DatabaseDown;
//! impl Failure for DatabaseDown {
//!     fn is_final(&self) -> bool { false } // released: a retry runs again
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = sqlx::mysql::MySqlPoolOptions::new()
//!     .connect("mysql://app@db/payments")
//!     .await?;
//! let store = MySqlStore::new(pool.clone());
//! store.migrate().await?;
//! let engine = Engine::new(store.clone());
//!
//! let call = Call::new("account-7", IdempotencyKey::parse("k-1")?, Fingerprint::of("debit", &1000)?);
//! let receipt = engine
//!     .run(&call, |claim| async move {
//!         let mut tx = store.begin_transaction().await.map_err(|_| DatabaseDown)?;
//!         sqlx::query("UPDATE accounts SET balance = balance - 1000 WHERE id = 7")
//!             .execute(&mut *tx)
//!             .await
//!             .map_err(|_| DatabaseDown)?;
//!         let receipt = String::from("debited 1000");
//!         // The record completes with the debit, or not at all; a holder
//!         // that lost its claim is rolled back.
//!         let outcome = encode_result(&Ok::<_, DatabaseDown>(&receipt)).map_err(|_| DatabaseDown)?;
//!         claim.commit(tx, &outcome).await.map_err(|_| DatabaseDown)?;
//!         Ok::<_, DatabaseDown>(receipt)
//!     })
//!     .await;
//! # Ok(())
//! # }
//! ```

pub use idem_sql::mysql::{MySqlStore, MySqlTransaction, Statements, DEFAULT_TABLE};
pub use idem_sql::{InvalidName, DEFAULT_TRACE};
