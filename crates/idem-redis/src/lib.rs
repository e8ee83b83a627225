//! # idem-redis
//!
//! A [`Store`] for idem on Redis and Redis Cluster, for services that run
//! many instances.
//!
//! - **One key per record**, `<prefix>{<record id>}`: the hash tag keeps a
//!   record in one slot, so it works on Redis Cluster unchanged.
//! - **One script call per transition** (`EVALSHA`; on `NOSCRIPT` the script is
//!   loaded and the call retried): a first request costs two commands (begin,
//!   complete), a replay or a duplicate in flight one.
//! - **The server's clock decides**: fencing tokens are the server's `TIME`
//!   in microseconds, and a record's key expires with its lease (in flight)
//!   or its TTL (completed), so application clocks never matter. Expiries are
//!   whole milliseconds, rounded up.
//! - **A compact record**: one string of state (1 byte), fingerprint (32),
//!   fencing token (16 digits), then the recorded outcome.
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
//!   [`StoreError`]: the operation does not run, and over HTTP the client gets
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

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{
    async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, RecordInfo, RecordInfoState,
    Removal, Store, StoreError, StoreFuture,
};
use redis::aio::ConnectionManager;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Script, Value};

mod operations;
mod record;
mod replay_cache;
mod sentinel;
mod slot;
mod transaction;
mod wake;
mod wire;

pub use transaction::RedisTransaction;

use idem_core::machine::micros;
use idem_core::waiters::Look;
use operations::parse_token;
use replay_cache::ReplayCache;
use sentinel::{manager_config, Followed};
use wake::{Server, Wakes};
use wire::{ms, Connection, TokenText};

/// The channel a store's changes are published on.
fn channel(prefix: &str) -> Arc<str> {
    Arc::from(format!("{prefix}wake"))
}

/// `begin(fingerprint, lease_ms, want_ttl)`. A new key is claimed by `TIME` and
/// `SET NX` alone; only an existing record is read. A fresh claim replies
/// with its token as a string, every other answer is a tagged array.
///
/// A record is one string: state (`F` in flight, `C` completed, `R`
/// released), fingerprint (32 bytes), fencing token (16 decimal digits of
/// server-clock microseconds), then the outcome of a completed record. The
/// key's own expiry is the lease deadline (in flight) or the TTL (completed),
/// so no script needs the clock to know whether a lease is alive: an expired
/// lease is a missing key.
const BEGIN: &str = include_str!("lua/begin.lua");

/// `complete(token, ttl_ms, outcome)`: 1 done (now, or before by this
/// token), 0 lost.
const COMPLETE: &str = include_str!("lua/complete.lua");

/// `release(token)`: the lease ends now. The record stays a millisecond as
/// released, so that a claim in that time draws its token above this one.
const RELEASE: &str = include_str!("lua/release.lua");

/// `renew(token, lease_ms)`: the key's expiry moves to now + lease.
const RENEW: &str = include_str!("lua/renew.lua");

/// `commit(token, ttl_ms, outcome, channel, reads, writes)`: a
/// transaction's writes with the record's completion (see the script).
const COMMIT: &str = include_str!("lua/commit.lua");

/// `inspect()`: 0 if no live record, else `{value, pttl}`.
const INSPECT: &str = include_str!("lua/inspect.lua");

/// `remove(force)`: 1 removed (ended now, token kept, as a release), 2 in
/// flight and not forced, 0 no live record.
const REMOVE: &str = include_str!("lua/remove.lua");

struct Scripts {
    begin: Script,
    complete: Script,
    release: Script,
    renew: Script,
    inspect: Script,
    remove: Script,
    commit: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            begin: Script::new(BEGIN),
            complete: Script::new(COMPLETE),
            release: Script::new(RELEASE),
            renew: Script::new(RENEW),
            inspect: Script::new(INSPECT),
            remove: Script::new(REMOVE),
            commit: Script::new(COMMIT),
        }
    }
}

/// Why connecting failed. The message never contains the connection string.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL could not be parsed.
    #[error("the Redis URL is not valid (expected redis://host:port[/db]): {0}")]
    InvalidUrl(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The server could not be reached.
    #[error("cannot connect to Redis: {0}")]
    Unreachable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A [`Store`] on Redis or Redis Cluster. Cheap to clone: clones share the
/// connection.
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    scripts: Arc<Scripts>,
    prefix: Arc<str>,
    timeout: Duration,
    /// Waking waiters (one server only), and the channel changes are
    /// published on (`<prefix>wake`; empty: none).
    wakes: Option<Arc<Wakes>>,
    channel: Arc<str>,
    /// Acknowledgements each change needs before it is acted on.
    replication: Option<Replication>,
}

/// `WAIT replicas timeout` after each change.
#[derive(Clone, Copy, Debug)]
struct Replication {
    replicas: u32,
    timeout: Duration,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.connection {
            Connection::Single(_) => "single",
            Connection::Sentinel(_) => "sentinel",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore")
            .field("connection", &kind)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("replication", &self.replication)
            .finish_non_exhaustive()
    }
}

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "idem:";

/// The default time a store call may take before it fails as unavailable.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

impl RedisStore {
    /// Connects to one Redis server (`redis://host:port[/db]`) through a
    /// `ConnectionManager`, which reconnects by itself after a failure.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let client = redis::Client::open(url).map_err(|e| ConnectError::InvalidUrl(Box::new(e)))?;
        let manager = ConnectionManager::new_with_config(client.clone(), manager_config())
            .await
            .map_err(|e| ConnectError::Unreachable(Box::new(e)))?;
        let mut store = Self::from_connection_manager(manager);
        store.wakes = Some(Arc::new(Wakes::new(Server::Fixed(client), None)));
        store.channel = channel(&store.prefix);
        Ok(store)
    }

    /// Connects to the primary that the Redis Sentinels at `sentinels`
    /// (`redis://host:port` each) name for `service`, and follows it: when a
    /// call fails in a way that may mean a failover (connection dropped or
    /// refused, `READONLY`, `MASTERDOWN`, no answer in time), the Sentinels
    /// are asked again and later calls go to the primary they name. The
    /// failing call itself fails as unavailable (nothing ran; the client
    /// retries). The wake channel subscribes again on the new primary.
    ///
    /// Redis replicates asynchronously: a failover can lose changes the old
    /// primary acknowledged. Add [`with_replication`](Self::with_replication)
    /// so that no claim or completion is acted on before replicas have it.
    pub async fn connect_sentinel<I, S>(sentinels: I, service: &str) -> Result<Self, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let sentinels: Vec<String> = sentinels
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .collect();
        let followed = Arc::new(Followed::connect(&sentinels, service).await?);
        let mut store = Self::with_connection(Connection::Sentinel(Arc::clone(&followed)));
        store.wakes = Some(Arc::new(Wakes::new(Server::Followed(followed), None)));
        store.channel = channel(&store.prefix);
        Ok(store)
    }

    /// Connects to a Redis Cluster through any of its nodes.
    pub async fn connect_cluster<I, S>(nodes: I) -> Result<Self, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(|n| n.as_ref().to_owned()).collect();
        let client = ClusterClient::builder(nodes)
            .connection_timeout(Duration::from_secs(1))
            .response_timeout(DEFAULT_TIMEOUT)
            .build()
            .map_err(|e| ConnectError::InvalidUrl(Box::new(e)))?;
        let connection = client
            .get_async_connection()
            .await
            .map_err(|e| ConnectError::Unreachable(Box::new(e)))?;
        Ok(Self::from_cluster_connection(connection))
    }

    /// A store over an existing `ConnectionManager`.
    pub fn from_connection_manager(manager: ConnectionManager) -> Self {
        Self::with_connection(Connection::Single(manager))
    }

    /// A store over an existing cluster connection.
    pub fn from_cluster_connection(connection: ClusterConnection) -> Self {
        Self::with_connection(Connection::Cluster(connection))
    }

    fn with_connection(connection: Connection) -> Self {
        Self {
            connection,
            scripts: Arc::new(Scripts::new()),
            prefix: Arc::from(DEFAULT_PREFIX),
            timeout: DEFAULT_TIMEOUT,
            wakes: None,
            channel: Arc::from(""),
            replication: None,
        }
    }

    /// Puts every key under `prefix` (default `idem:`), to share a database
    /// between services or tests.
    #[must_use]
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        if let Some(wakes) = &self.wakes {
            // Another channel: waiters of the old one are not this store's.
            let cache = wakes.cache.as_ref().map(ReplayCache::fresh);
            self.wakes = Some(Arc::new(Wakes::new(wakes.server().clone(), cache)));
            self.channel = channel(prefix);
        }
        self
    }

    /// Requires every change (a claim, a completion, a commit, a renewal,
    /// a release, a removal) to reach `replicas` replicas within `timeout`
    /// before idem acts on it: each script call is followed by
    /// `WAIT replicas timeout` in the same round trip (a pipeline).
    ///
    /// - A claim not replicated in time is not acted on: nothing runs, the
    ///   caller gets a transient store error (HTTP 503 `store-unavailable`),
    ///   and the claim is released at once, since nothing ran under it (a
    ///   release that is lost too leaves it to its lease, which is as safe).
    /// - A completion not replicated in time fails like a completion the
    ///   store did not take: the engine keeps the claim and completes again
    ///   while the lease lasts (a second completion by the same token is a
    ///   no-op that waits again).
    /// - Any other answer of `begin` (in flight, replay, mismatch) waits too,
    ///   so that a replay is never served from a record a failover could
    ///   lose.
    ///
    /// What `WAIT` promises: the replicas received the change; not that
    /// they wrote it to disk, nor that a failover promotes one of them.
    /// Sentinel promotes the replica with the most data it can reach, so
    /// with `replicas` at least one and a majority of Sentinels able to see
    /// that replica, an acknowledged change survives the failover; it is
    /// not consensus. On Redis Cluster the `WAIT` goes with the script to
    /// the primary of the record's slot; the cluster promotes a replica of a
    /// failed primary by a vote of the other primaries, preferring the
    /// replica with the most data.
    #[must_use]
    pub fn with_replication(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replication = (replicas > 0).then_some(Replication { replicas, timeout });
        self
    }

    /// Answers replays of completed records from this process, without a
    /// round trip, keeping at most `max_bytes` of recorded outcomes, each at
    /// most `max_age` (and never past its record's TTL). Off by default.
    ///
    /// A completed record only expires or is removed, and every removal is
    /// published on the store's wake channel by the script that makes it, so
    /// the cache forgets a removed record as soon as its message arrives,
    /// and is used only while the channel is subscribed (losing it empties
    /// the cache). What this gives up:
    ///
    /// - **A removal is seen by the other instances a few milliseconds
    ///   late**: in that time one of them may still replay the record an
    ///   operator just removed, instead of running the operation again.
    /// - **A subscription that dies silently** (a partition that leaves its
    ///   connection open) is noticed late: for up to `max_age`, removals are
    ///   missed. Keep `max_age` as short as that risk needs (seconds).
    /// - **Records removed behind the store's back** (`DEL`, `FLUSHDB`, an
    ///   eviction under `maxmemory`) publish nothing: an instance may replay
    ///   them for up to `max_age`. Remove records with
    ///   [`Store::remove`] (or the admin routes).
    ///
    /// A claim, a duplicate in flight and a first request are never answered
    /// from the cache: only completed records are kept, filled from Redis's
    /// replies to retries. On Redis Cluster, whose stores have no wake
    /// channel, the cache is never used.
    #[must_use]
    pub fn with_replay_cache(mut self, max_bytes: u64, max_age: Duration) -> Self {
        if let Some(wakes) = &self.wakes {
            let cache = ReplayCache::new(max_bytes, max_age);
            self.wakes = Some(Arc::new(Wakes::new(wakes.server().clone(), Some(cache))));
        }
        self
    }

    /// How long one store call may take before it fails as unavailable
    /// (default 2s).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The Redis key of a record: `<prefix>{<hex record id>}`.
    pub fn key(&self, id: &RecordId) -> String {
        let mut key = String::with_capacity(self.prefix.len() + 66);
        key.push_str(&self.prefix);
        key.push('{');
        id.push_hex(&mut key);
        key.push('}');
        key
    }

    async fn invoke(
        &self,
        what: &'static str,
        script: &Script,
        key: String,
        args: &[&[u8]],
    ) -> Result<Value, StoreError> {
        self.eval(what, script, &evalsha(script, key, args)).await
    }

    /// Runs an `EVALSHA` built by the caller, loading the script on
    /// `NOSCRIPT`, under the store's timeout; with
    /// [`with_replication`](Self::with_replication), a reply whose change did
    /// not reach the replicas in time is an error.
    async fn eval(
        &self,
        what: &'static str,
        script: &Script,
        eval: &redis::Cmd,
    ) -> Result<Value, StoreError> {
        let (value, replicated) = self.eval_replicated(what, script, eval).await?;
        replicated.map(|()| value)
    }

    /// The reply, and whether its change reached the replicas the store
    /// requires (`Err`: the error to answer if it matters).
    async fn eval_replicated(
        &self,
        what: &'static str,
        script: &Script,
        eval: &redis::Cmd,
    ) -> Result<(Value, Result<(), StoreError>), StoreError> {
        let replication = self.replication.filter(|_| what != "inspect");
        let call = async {
            let mut connection = self.connection.clone();
            let Some(r) = replication else {
                let value = match connection.query(eval).await {
                    Err(e) if is_no_script(&e) => {
                        connection.load(script).await?;
                        connection.query(eval).await
                    }
                    result => result,
                }?;
                return Ok((value, None));
            };
            let mut pipe = redis::pipe();
            pipe.add_command(eval.clone())
                .cmd("WAIT")
                .arg(r.replicas)
                .arg(micros(r.timeout).div_ceil(1000).max(1));
            let slot = slot::slot(eval_key(eval));
            let replies = match connection.query_pipeline(&pipe, slot).await {
                Err(e) if is_no_script(&e) => {
                    connection.load(script).await?;
                    connection.query_pipeline(&pipe, slot).await
                }
                result => result,
            }?;
            let mut replies = replies.into_iter();
            match (replies.next(), replies.next()) {
                (Some(value), Some(Value::Int(acked))) => Ok((value, Some(acked))),
                _ => Err(redis::RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "a script and WAIT did not answer two replies",
                ))),
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok((value, acked))) => {
                let replicated = match (replication, acked) {
                    (Some(r), Some(acked)) if acked < i64::from(r.replicas) => {
                        Err(StoreError::unavailable_because(format!(
                            "redis {what}: the change reached {acked} of the {} replicas required within {:?}, so it is not acted on",
                            r.replicas, r.timeout
                        )))
                    }
                    _ => Ok(()),
                };
                Ok((value, replicated))
            }
            Ok(Err(e)) if is_corrupt(&e) => Err(StoreError::corrupt(format!("redis {what}: {e}"))),
            Ok(Err(e)) => Err(StoreError::unavailable(format!("redis {what} failed"), e)),
            Err(elapsed) => {
                self.connection.suspect();
                Err(StoreError::unavailable(
                    format!("redis {what} did not answer within {:?}", self.timeout),
                    elapsed,
                ))
            }
        }
    }

    /// A transaction for the operation's own writes in this Redis, committed
    /// by [`Claim::commit`](idem_core::Claim::commit) in one script call
    /// together with the record's completion, only while the claim holds.
    pub fn transaction(&self) -> RedisTransaction {
        RedisTransaction::new(self.clone())
    }

    /// Whether this store talks to a Redis Cluster (where a transaction's
    /// keys must share the record's hash slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self.connection, Connection::Cluster(_))
    }

    /// A key for the operation's own data that shares the record's hash
    /// slot: `<name>{<hex record id>}`. On Redis Cluster every key a
    /// [`RedisTransaction`] reads or writes must carry the record's hash tag
    /// like this one.
    pub fn tagged_key(&self, id: &RecordId, name: &str) -> String {
        let mut key = String::with_capacity(name.len() + 66);
        key.push_str(name);
        key.push('{');
        id.push_hex(&mut key);
        key.push('}');
        key
    }

    /// The replay cache, if the store has one ([`with_replay_cache`](Self::with_replay_cache)).
    fn replay_cache(&self) -> Option<&ReplayCache> {
        self.wakes.as_ref()?.cache.as_ref()
    }

    async fn fenced(
        &self,
        what: &'static str,
        script: &Script,
        id: &RecordId,
        args: &[&[u8]],
    ) -> Result<(), StoreError> {
        match self.invoke(what, script, self.key(id), args).await? {
            Value::Int(1) => Ok(()),
            Value::Int(0) => Err(StoreError::lease_lost()),
            other => Err(StoreError::corrupt(format!(
                "redis {what}: unexpected reply {other:?}"
            ))),
        }
    }
}

/// `EVALSHA` of `script` on `key` with `args`, built directly (one copy of
/// the arguments); on `NOSCRIPT` (a restarted or flushed server) the script
/// is loaded and the call retried once.
fn evalsha(script: &Script, key: String, args: &[&[u8]]) -> redis::Cmd {
    let data = 7 + 40 + 1 + key.len() + args.iter().map(|a| a.len()).sum::<usize>();
    let mut eval = redis::Cmd::with_capacity(4 + args.len(), data);
    eval.arg("EVALSHA").arg(script.get_hash()).arg(1).arg(key);
    for arg in args {
        eval.arg(*arg);
    }
    eval
}

/// The key of an `EVALSHA <sha> <numkeys> <key> ...` (its fourth argument).
fn eval_key(eval: &redis::Cmd) -> &[u8] {
    match eval.args_iter().nth(3) {
        Some(redis::Arg::Simple(key)) => key,
        _ => b"",
    }
}

fn is_no_script(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

fn is_corrupt(e: &redis::RedisError) -> bool {
    e.to_string().contains("idem: corrupt record")
}

impl RedisStore {
    /// The answer to `begin` from the replay cache, if it has one.
    fn begin_cached(&self, id: &RecordId, fingerprint: &Fingerprint) -> Option<Begin> {
        let cache = self.replay_cache()?;
        if let Some(wakes) = &self.wakes {
            // The cache is used only while the wake channel is subscribed.
            wakes.start(&self.channel);
        }
        cache.answer(id, fingerprint)
    }

    /// `begin`, asked of Redis (the cache had no answer).
    async fn begin_in_redis(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        let cache = self.replay_cache();
        let ticket = cache.and_then(|c| Some((c, c.ticket(id)?)));
        // With a cache, a replay also answers its key's time to live.
        let want_ttl: &[u8] = if ticket.is_some() { b"1" } else { b"" };
        let eval = evalsha(
            &self.scripts.begin,
            self.key(id),
            &[
                fingerprint.as_bytes(),
                ms(lease, &mut itoa::Buffer::new()),
                want_ttl,
            ],
        );
        let sent = Instant::now();
        let (reply, replicated) = self
            .eval_replicated("begin", &self.scripts.begin, &eval)
            .await?;
        if let Err(not_replicated) = replicated {
            // Not acted on. A claim is released at once: nothing ran under it.
            if let Value::BulkString(token) = &reply {
                let lease = Lease {
                    token: parse_token(token)?,
                    duration: lease,
                };
                let _ = self.release(id, &lease).await;
            }
            return Err(not_replicated);
        }
        let unexpected = || StoreError::corrupt(format!("redis begin: unexpected reply {reply:?}"));
        let items = match &reply {
            Value::BulkString(token) => {
                return Ok(Begin::Acquired(Lease {
                    token: parse_token(token)?,
                    duration: lease,
                }))
            }
            Value::Array(items) => items,
            _ => return Err(unexpected()),
        };
        match (items.first(), items.get(1)) {
            (Some(Value::BulkString(tag)), Some(Value::Int(left))) if tag == b"I" => {
                // PTTL: milliseconds left of the lease (negative if the
                // key has no expiry, which a lease always has).
                let left = u64::try_from(*left).map_err(|_| unexpected())?;
                Ok(Begin::InFlight {
                    retry_after: Duration::from_millis(left),
                })
            }
            (Some(Value::BulkString(tag)), Some(Value::BulkString(bytes))) if tag == b"R" => {
                let outcome = Outcome::new(bytes.clone());
                if let (Some((cache, ticket)), Some(Value::Int(left))) = (ticket, items.get(2)) {
                    // The key lives at least `left` ms after the call was sent.
                    if let Ok(left) = u64::try_from(*left) {
                        let expires = sent + Duration::from_millis(left);
                        cache.fill(id, ticket, fingerprint, &outcome, expires);
                    }
                }
                Ok(Begin::Replay(outcome))
            }
            (Some(Value::BulkString(tag)), None) if tag == b"M" => Ok(Begin::Mismatch),
            _ => Err(unexpected()),
        }
    }

    /// `complete`'s script.
    async fn complete_in_redis(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let token = TokenText::new(lease.token);
        self.fenced(
            "complete",
            &self.scripts.complete,
            id,
            &[
                token.as_bytes(),
                ms(ttl, &mut itoa::Buffer::new()),
                outcome.as_bytes(),
                self.channel.as_bytes(),
            ],
        )
        .await
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        match self.begin_cached(id, fingerprint) {
            Some(answer) => Ok(answer),
            None => self.begin_in_redis(id, fingerprint, lease).await,
        }
    }

    // A replay from the cache is answered at once, allocating nothing; a
    // call to Redis boxes its work once.
    fn begin_owned(
        self: Arc<Self>,
        id: RecordId,
        fingerprint: Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin> {
        match self.begin_cached(&id, &fingerprint) {
            Some(answer) => StoreFuture::ready(Ok(answer)),
            None => {
                StoreFuture::boxed(
                    async move { self.begin_in_redis(&id, &fingerprint, lease).await },
                )
            }
        }
    }

    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.complete_in_redis(id, lease, outcome, ttl).await
    }

    fn complete_owned(
        self: Arc<Self>,
        id: RecordId,
        lease: Lease,
        outcome: Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        StoreFuture::boxed(async move { self.complete_in_redis(&id, &lease, &outcome, ttl).await })
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        let token = TokenText::new(lease.token);
        self.fenced(
            "release",
            &self.scripts.release,
            id,
            &[token.as_bytes(), self.channel.as_bytes()],
        )
        .await
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        let token = TokenText::new(lease.token);
        self.fenced(
            "renew",
            &self.scripts.renew,
            id,
            &[token.as_bytes(), ms(duration, &mut itoa::Buffer::new())],
        )
        .await?;
        Ok(Lease {
            token: lease.token,
            duration,
        })
    }

    fn name(&self) -> &'static str {
        "redis"
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        let reply = self
            .invoke("inspect", &self.scripts.inspect, self.key(id), &[])
            .await?;
        operations::inspected(&reply)
    }

    fn wakes(&self) -> bool {
        self.wakes.is_some()
    }

    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        let Some(wakes) = &self.wakes else {
            tokio::time::sleep(within).await;
            return None;
        };
        wakes.start(&self.channel);
        let look = async {
            match self.inspect(id).await {
                Ok(Some(RecordInfo {
                    state: RecordInfoState::InFlight { .. },
                    ..
                })) => Look::InFlight,
                Ok(read) => Look::Changed(read),
                Err(_) => Look::Changed(None),
            }
        };
        wakes.waiters.wait(self.key(id), within, look).await
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        let force: &[u8] = if force { b"1" } else { b"0" };
        let reply = self
            .invoke(
                "remove",
                &self.scripts.remove,
                self.key(id),
                &[force, self.channel.as_bytes()],
            )
            .await?;
        let removal = operations::removed(&reply)?;
        if let (Removal::Removed, Some(cache)) = (&removal, self.replay_cache()) {
            cache.changed(id);
        }
        Ok(removal)
    }
}
