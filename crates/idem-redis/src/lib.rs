//! # idem-redis
//!
//! A [`Store`](idem_core::Store) for idem on Redis and Redis Cluster, for services that run
//! many instances.
//!
//! - **One key per record**, its late-retry trace included:
//!   `<prefix>{<slot tag>}<base64url id>` ([`KeyLayout::Compact`], the
//!   default), or `<prefix>{<hex record id>}` ([`KeyLayout::Hex`], 29 bytes
//!   longer): the hash tag keeps a record in one slot, so it works on Redis
//!   Cluster unchanged, and both layouts of a record share that slot, so
//!   every script finds a record under either.
//! - **One script call per transition** (`EVALSHA`; on `NOSCRIPT` the script is
//!   loaded and the call retried): a first request costs two commands (begin,
//!   complete), a replay or a duplicate in flight one. Claims and completions
//!   asked for while others are on the wire go together in one call
//!   ([`RedisStore::with_batching`], on by default): a queue consumer's
//!   fetched batch claims its messages in one call and records them in one.
//! - **The server's clock decides**: fencing tokens are the server's `TIME`
//!   in microseconds, and a record's key expires with its lease (in flight)
//!   or its TTL (completed), so application clocks never matter. Expiries are
//!   whole milliseconds, rounded up.
//! - **A compact record**: one string of state (1 byte), fingerprint (32),
//!   fencing token (16 digits), for a completed record that carries its
//!   trace the trace's length (13 digits), then the recorded outcome.
//! - **Writes that land with the record**: a [`RedisTransaction`]
//!   ([`RedisStore::transaction`]) stages the operation's own writes and
//!   commits them with the record's completion in one script call, only
//!   while the claim holds and what it read is unchanged
//!   (`idem_core::Claim::commit`): a holder that stalled past its lease or
//!   was force-removed writes nothing.
//! - **Replays without a round trip, if asked**
//!   ([`RedisStore::with_replay_cache`]): completed records kept in
//!   process, no longer than their TTL, forgotten when the wake channel
//!   says they were removed; counted with the `metrics` feature.
//! - **Fails closed**: a connection failure or a timeout is a transient
//!   [`StoreError`](idem_core::StoreError): the operation does not run, and over HTTP the client gets
//!   503 with `Retry-After`. The single-node connection is a
//!   `ConnectionManager`, and the cluster connection reconnects by itself,
//!   so the store recovers when the server returns, without a restart.
//!
//! ```no_run
//! use idem_core::Engine;
//! use idem_redis::RedisStore;
//!
//! # async fn demo() -> Result<(), idem_redis::ConnectError> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
//! let engine = Engine::new(store.with_prefix("payments:idem:"));
//!
//! let cluster = RedisStore::connect_cluster([
//!     "redis://10.0.0.1:6379",
//!     "redis://10.0.0.2:6379",
//!     "redis://10.0.0.3:6379",
//! ])
//! .await?;
//! # Ok(())
//! # }
//! ```

mod batch;
mod connector;
mod eviction;
mod key_layout;
mod operations;
mod query;
mod redis_store;
mod replay_cache;
mod replication;
mod scripts;
mod sentinel;
mod slot;
mod store;
mod transaction;
mod value_layout;
mod wake;
mod wire;

pub use connector::{ConnectError, Connector};
pub use key_layout::KeyLayout;
pub use redis_store::{RedisStore, DEFAULT_PREFIX, DEFAULT_TIMEOUT, DEFAULT_TRACE};
pub use transaction::RedisTransaction;

pub(crate) use redis_store::channel;
