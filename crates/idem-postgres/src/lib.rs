//! # idem-postgres
//!
//! A [`Store`](idem_core::Store) for idem on PostgreSQL, the SQL store of
//! [`idem_sql`] with its PostgreSQL dialect: records that survive a cache
//! flush, and
//! exactly-once effects, because a record can complete **in the same
//! transaction as the business writes** ([`PgStore::begin_transaction`] and
//! [`Claim::commit`](idem_core::Claim::commit)): either both commit or
//! neither does, and a holder that lost its claim commits nothing.
//!
//! - `begin` is one statement (`INSERT ... ON CONFLICT DO UPDATE ... WHERE`
//!   the old record is no longer live, with a read of the live one in the
//!   same statement); it takes over an expired lease atomically.
//! - `complete`, `release` and `renew` are one `UPDATE` each, matching the
//!   fencing token; a holder whose lease ran out or was taken over changes
//!   nothing and gets `LeaseLost`.
//! - Expiry is decided by the server's `clock_timestamp()`.
//! - The schema ships with the crate ([`PgStore::migrate`], safe to run
//!   twice and concurrently; or take [`PgStore::migration_sql`] into your own
//!   migration tool). Schema and table names are configurable.
//! - Expired records are purged in bounded batches
//!   ([`PgStore::purge_expired`]), optionally by a background task
//!   ([`PgStore::spawn_purger`]).
//!
//! ```no_run
//! use idem_core::{encode_result, Call, Engine, Failure, Fingerprint, IdempotencyKey};
//! use idem_postgres::PgStore;
//!
//! #[derive(Debug, serde::Serialize, serde::Deserialize)]
//! struct DatabaseDown;
//! impl Failure for DatabaseDown {
//!     fn is_final(&self) -> bool { false } // released: a retry runs again
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = sqlx::postgres::PgPoolOptions::new()
//!     .connect("postgres://app@db/payments")
//!     .await?;
//! let store = PgStore::new(pool.clone()).with_schema("idem")?;
//! store.migrate().await?;
//! let engine = Engine::new(store.clone());
//!
//! let call = Call::new("account-7", IdempotencyKey::parse("k-1")?, Fingerprint::of("debit", &1000)?);
//! let receipt = engine
//!     .run(&call, |claim| async move {
//!         // Not `pool.begin()`: see `PgStore::begin_transaction`.
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

pub use idem_sql::postgres::{
    PgSettings, PgStore, PgTransaction, Statements, DEFAULT_SCHEMA, DEFAULT_TABLE,
};
pub use idem_sql::{InvalidName, DEFAULT_TRACE};
