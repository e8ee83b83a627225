//! `RedisStore`: a store on Redis, how it is built and configured.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use idem_core::StoreError;
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Script, Value};

use crate::batch::Batcher;
use crate::connector::{ConnectError, Connector};
use crate::eviction::Eviction;
use crate::key_layout::KeyLayout;
use crate::replay_cache::ReplayCache;
use crate::replication::Replication;
use crate::scripts::{eval_key, evalsha, is_corrupt, is_no_script, newer_format, Scripts};
use crate::transaction::RedisTransaction;
use crate::wake::Wakes;
use crate::wire::{Connection, TraceText};
use crate::{operations, slot};

/// The channel a store's changes are published on.
pub(crate) fn channel(prefix: &str) -> Arc<str> {
    Arc::from(format!("{prefix}wake"))
}

/// A [`Store`](idem_core::Store) on Redis or Redis Cluster. Cheap to clone: clones share the
/// connection.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) connection: Connection,
    pub(crate) scripts: Arc<Scripts>,
    pub(crate) prefix: Arc<str>,
    pub(crate) timeout: Duration,
    /// Waking waiters (one server only), and the channel changes are
    /// published on (`<prefix>wake`; empty: none).
    pub(crate) wakes: Option<Arc<Wakes>>,
    pub(crate) channel: Arc<str>,
    /// The key each replication round writes (`<prefix>durable`).
    pub(crate) mark: Arc<str>,
    /// Acknowledgements each change needs before it is acted on.
    pub(crate) replication: Option<Replication>,
    /// What the server's eviction policy allows.
    pub(crate) eviction: Arc<Eviction>,
    /// How long a completed record's trace outlives it.
    pub(crate) trace: Duration,
    /// The keys new records are written under.
    pub(crate) layout: KeyLayout,
    /// Whether begins and completions asked for at once share script calls
    /// ([`with_batching`](Self::with_batching)), and their queues.
    pub(crate) batching: bool,
    pub(crate) batcher: Arc<Batcher>,
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

/// How long a completed record's trace outlives it by default: a day.
pub const DEFAULT_TRACE: Duration = Duration::from_hours(24);

/// The default time a store call may take before it fails as unavailable.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

impl RedisStore {
    /// How the store connects: [`Connector`] ([`Connector::accept_eviction`]).
    pub fn connector() -> Connector {
        Connector::default()
    }

    /// Connects to one Redis server (`redis://host:port[/db]`) through a
    /// `ConnectionManager`, which reconnects by itself after a failure.
    /// Refused ([`ConnectError::EvictionPolicy`]) if the server may evict
    /// records before their TTL: see [`Connector::accept_eviction`].
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Connector::default().connect(url).await
    }

    /// Connects to the primary that the Redis Sentinels at `sentinels` name
    /// for `service`, and follows it ([`Connector::connect_sentinel`]).
    pub async fn connect_sentinel<I, S>(sentinels: I, service: &str) -> Result<Self, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Connector::default()
            .connect_sentinel(sentinels, service)
            .await
    }

    /// Connects to a Redis Cluster through any of its nodes
    /// ([`Connector::connect_cluster`]).
    pub async fn connect_cluster<I, S>(nodes: I) -> Result<Self, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Connector::default().connect_cluster(nodes).await
    }

    /// Keys the server reported evicted (`INFO stats`, summed over a
    /// cluster's nodes) since this store first looked; read when it
    /// connects and every few seconds of use after. Anything but 0 means
    /// records may have been forgotten before their TTL.
    pub fn evictions_seen(&self) -> u64 {
        self.eviction.seen()
    }

    /// A store over an existing `ConnectionManager`. Its server's eviction
    /// policy is read at the first claim, which is refused if the policy may
    /// evict records.
    pub fn from_connection_manager(manager: ConnectionManager) -> Self {
        Self::with_connection(Connection::Single(manager), Eviction::new(false))
    }

    /// A store over an existing cluster connection (its policy read as
    /// [`from_connection_manager`](Self::from_connection_manager)'s).
    pub fn from_cluster_connection(connection: ClusterConnection) -> Self {
        Self::with_connection(Connection::Cluster(connection), Eviction::new(false))
    }

    pub(crate) fn with_connection(connection: Connection, eviction: Eviction) -> Self {
        Self {
            eviction: Arc::new(eviction),
            connection,
            scripts: Arc::new(Scripts::new()),
            prefix: Arc::from(DEFAULT_PREFIX),
            timeout: DEFAULT_TIMEOUT,
            wakes: None,
            channel: Arc::from(""),
            mark: Arc::from(format!("{DEFAULT_PREFIX}durable")),
            replication: None,
            trace: DEFAULT_TRACE,
            layout: KeyLayout::Compact,
            batching: true,
            batcher: Arc::default(),
        }
    }

    /// Puts every key under `prefix` (default `idem:`), to share a database
    /// between services or tests.
    #[must_use]
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self.mark = Arc::from(format!("{prefix}durable"));
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
    /// Concurrent changes share their waits (group commit): each joins the
    /// next round of a small write and one `WAIT` on a connection of the
    /// rounds' own, which covers every change (and every read) whose reply
    /// arrived before it, on Redis 7.0, 7.2+ and Valkey 8 alike. On Redis
    /// Cluster each change is followed by its own `WAIT` on its slot's node.
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
        self.replication = (replicas > 0).then(|| Replication::new(replicas, timeout));
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
    ///   [`Store::remove`](idem_core::Store::remove) (or the admin routes).
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

    /// How long after a completed record expires a retry of it is still
    /// refused ([`Begin::Expired`](idem_core::store::Begin::Expired), HTTP 412)
    /// rather than run again (default [`DEFAULT_TRACE`], a day;
    /// `Duration::ZERO` turns it off). The record carries its trace: its
    /// key outlives the replay by `trace`, and past the replay it answers
    /// only "expired" (or "another request", for another fingerprint). A
    /// trace key of the version before (`<key>:t`, the fingerprint alone)
    /// is read as such. Removing the record removes its trace too.
    #[must_use]
    pub fn with_expired_trace(mut self, trace: Duration) -> Self {
        self.trace = trace;
        self
    }

    /// Whether the claims and completions of a batch
    /// ([`idem_core::adapter::in_batch`]: a queue consumer's fetched deliveries,
    /// `idem_queue::Consumer::handle_batch`) go together, one script call
    /// for all those asked at once (per hash slot on a cluster), their
    /// records read in one `MGET`. On by default; calls outside a batch (an
    /// HTTP request) always go alone, at once.
    ///
    /// Each record in a batch runs the single call's code on its own keys,
    /// fails alone (before its first write), and is answered as its call
    /// alone would be. A full batch's scripts cost a fifth to a third less
    /// Redis CPU a message than its calls one by one (`docs/benchmarks.md`). With
    /// [`with_replication`](Self::with_replication) every call goes alone,
    /// followed by its `WAIT`.
    #[must_use]
    pub fn with_batching(mut self, batching: bool) -> Self {
        self.batching = batching;
        self
    }

    /// Whether this call goes in a batch: asked inside one
    /// ([`idem_core::adapter::in_batch`]), on a store that batches.
    pub(crate) fn batches(&self) -> bool {
        self.batching && self.replication.is_none() && idem_core::adapter::is_in_batch()
    }

    /// How long one store call may take before it fails as unavailable
    /// (default 2s).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The trace's length as the scripts take it ([`TraceText`]).
    pub(crate) fn trace_ms(&self) -> TraceText {
        TraceText::new(self.trace)
    }

    pub(crate) async fn invoke(
        &self,
        what: &'static str,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value, StoreError> {
        self.eval(what, script, &evalsha(script, keys, args)).await
    }

    /// Runs an `EVALSHA` built by the caller, loading the script on
    /// `NOSCRIPT`, under the store's timeout; with
    /// [`with_replication`](Self::with_replication), a reply whose change did
    /// not reach the replicas in time is an error.
    pub(crate) async fn eval(
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
    pub(crate) async fn eval_replicated(
        &self,
        what: &'static str,
        script: &Script,
        eval: &redis::Cmd,
    ) -> Result<(Value, Result<(), StoreError>), StoreError> {
        let replication = self.replication.as_ref().filter(|_| what != "inspect");
        let call = async {
            let mut connection = self.connection.clone();
            let generation = connection.generation();
            // On a cluster a change takes its WAIT along, to its slot's node.
            let Some(r) = replication.filter(|_| self.is_cluster()) else {
                let value = match connection.query(eval).await {
                    Err(e) if is_no_script(&e) => {
                        connection.load(script).await?;
                        connection.query(eval).await
                    }
                    result => result,
                }?;
                // The durable mode elsewhere: the next round's WAIT (group
                // commit, replication.rs).
                let covered = match (replication, self.wakes.as_deref()) {
                    (None, _) => Ok(()),
                    (Some(r), Some(wakes)) => {
                        r.covered(what, wakes.server(), &self.mark, generation)
                            .await
                    }
                    (Some(_), None) => Err(StoreError::unavailable_because(
                        "the durable mode has no server to wait on",
                    )),
                };
                return Ok((value, covered));
            };
            let mut pipe = redis::pipe();
            pipe.add_command(eval.clone()).add_command(r.wait_command());
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
                (Some(value), Some(Value::Int(acked))) => Ok((value, r.check(what, acked))),
                _ => Err(redis::RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "a script and WAIT did not answer two replies",
                ))),
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) if newer_format(&e).is_some() => Err(operations::newer_format(
                newer_format(&e).unwrap_or(b'?'),
            )),
            Ok(Err(e)) if is_corrupt(&e) => Err(StoreError::corrupt(format!("redis {what}: {e}"))),
            Ok(Err(e)) if e.code() == Some("OOM") => Err(StoreError::full_because(format!(
                "redis {what}: the server is full (used memory over maxmemory, and nothing it may evict), so it takes no new record; records it keeps are still answered"
            ))),
            Ok(Err(e)) => {
                self.eviction.check_soon();
                Err(StoreError::unavailable(format!("redis {what} failed"), e))
            }
            Err(elapsed) => {
                self.eviction.check_soon();
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

    /// The replay cache, if the store has one ([`with_replay_cache`](Self::with_replay_cache)).
    pub(crate) fn replay_cache(&self) -> Option<&ReplayCache> {
        self.wakes.as_ref()?.cache.as_ref()
    }

    pub(crate) async fn fenced(
        &self,
        what: &'static str,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<(), StoreError> {
        fenced_reply(what, self.invoke(what, script, keys, args).await?)
    }
}

/// A fenced script's reply: 1 done, 0 the claim is lost.
pub(crate) fn fenced_reply(what: &str, reply: Value) -> Result<(), StoreError> {
    match reply {
        Value::Int(1) => Ok(()),
        Value::Int(0) => Err(StoreError::lease_lost()),
        other => Err(StoreError::corrupt(format!(
            "redis {what}: unexpected reply {other:?}"
        ))),
    }
}
