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
//! - **The server's clock decides**: scripts read `TIME` and set `PX` expiries
//!   themselves, so application clocks never matter.
//! - **A compact record**: one string of state (1 byte), fingerprint (32),
//!   fencing token (8), deadline (8), then the recorded outcome.
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
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::{
    async_trait, Begin, FencingToken, Fingerprint, Lease, Outcome, RecordId, Store, StoreError,
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Script, Value};

/// Parses a record: state, fingerprint, token, deadline (store-clock micros).
const PARSE: &str = r"
local function parse(v)
  if #v < 49 then
    error('idem: corrupt record')
  end
  local token = struct.unpack('>d', v, 34)
  local deadline = struct.unpack('>d', v, 42)
  return string.sub(v, 1, 1), string.sub(v, 2, 33), token, deadline
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
";

/// `begin(fingerprint, lease_us)`. A new key is claimed by `SET NX` alone;
/// only an existing record is read.
const BEGIN: &str = r"
local lease = tonumber(ARGV[2])
local px = math.floor(lease / 1000) + 1
if redis.call('SET', KEYS[1], 'F' .. ARGV[1] .. struct.pack('>dd', now, now + lease), 'NX', 'PX', px) then
  return {'A', now}
end
local v = redis.call('GET', KEYS[1])
local prev = 0
if v then
  local state, fp, token, deadline = parse(v)
  if deadline > now then
    if fp ~= ARGV[1] then return {'M'} end
    if state == 'F' then return {'I', deadline - now} end
    return {'R', string.sub(v, 50)}
  end
  prev = token
end
local token = math.max(prev + 1, now)
redis.call('SET', KEYS[1], 'F' .. ARGV[1] .. struct.pack('>dd', token, now + lease), 'PX', px)
return {'A', token}
";

/// `complete(token, ttl_us, outcome)`: 1 done (now or before by this token), 0 lost.
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local state, fp, token, deadline = parse(v)
if deadline <= now or token ~= tonumber(ARGV[1]) then return 0 end
if state == 'C' then return 1 end
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], 'C' .. fp .. struct.pack('>dd', token, now + ttl) .. ARGV[3],
  'PX', math.floor(ttl / 1000) + 1)
return 1
";

/// `release(token)`: the lease ends now; the record stays a millisecond so
/// that the next token is drawn above this one.
const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local state, fp, token, deadline = parse(v)
if state ~= 'F' or deadline <= now or token ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], 'F' .. fp .. struct.pack('>dd', token, now), 'PX', 1)
return 1
";

/// `renew(token, lease_us)`.
const RENEW: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local state, fp, token, deadline = parse(v)
if state ~= 'F' or deadline <= now or token ~= tonumber(ARGV[1]) then return 0 end
local lease = tonumber(ARGV[2])
redis.call('SET', KEYS[1], 'F' .. fp .. struct.pack('>dd', token, now + lease),
  'PX', math.floor(lease / 1000) + 1)
return 1
";

struct Scripts {
    begin: Script,
    complete: Script,
    release: Script,
    renew: Script,
}

impl Scripts {
    fn new() -> Self {
        let with = |body: &str| Script::new(&format!("{PARSE}{body}"));
        Self {
            begin: with(BEGIN),
            complete: with(COMPLETE),
            release: with(RELEASE),
            renew: with(RENEW),
        }
    }
}

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
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
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.connection {
            Connection::Single(_) => "single",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore")
            .field("connection", &kind)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
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
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(DEFAULT_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| ConnectError::Unreachable(Box::new(e)))?;
        Ok(Self::from_connection_manager(manager))
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
        }
    }

    /// Puts every key under `prefix` (default `idem:`), to share a database
    /// between services or tests.
    #[must_use]
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
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
        format!("{}{{{}}}", self.prefix, id.to_hex())
    }

    async fn invoke(
        &self,
        what: &'static str,
        script: &Script,
        key: String,
        args: &[&[u8]],
    ) -> Result<Value, StoreError> {
        let mut invocation = script.key(key);
        for arg in args {
            invocation.arg(*arg);
        }
        let call = async {
            match self.connection.clone() {
                Connection::Single(mut c) => invocation.invoke_async::<Value>(&mut c).await,
                Connection::Cluster(mut c) => invocation.invoke_async::<Value>(&mut c).await,
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if is_corrupt(&e) => Err(StoreError::corrupt(format!("redis {what}: {e}"))),
            Ok(Err(e)) => Err(StoreError::unavailable(format!("redis {what} failed"), e)),
            Err(elapsed) => Err(StoreError::unavailable(
                format!("redis {what} did not answer within {:?}", self.timeout),
                elapsed,
            )),
        }
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

fn is_corrupt(e: &redis::RedisError) -> bool {
    e.to_string().contains("idem: corrupt record")
}

fn us(d: Duration) -> Vec<u8> {
    micros(d).to_string().into_bytes()
}

fn int(v: &Value) -> Option<u64> {
    match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
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
        let reply = self
            .invoke(
                "begin",
                &self.scripts.begin,
                self.key(id),
                &[fingerprint.as_bytes(), &us(lease)],
            )
            .await?;
        let Value::Array(items) = &reply else {
            return Err(StoreError::corrupt(format!(
                "redis begin: unexpected reply {reply:?}"
            )));
        };
        let tag = match items.first() {
            Some(Value::BulkString(tag)) => tag.as_slice(),
            Some(Value::SimpleString(tag)) => tag.as_bytes(),
            _ => b"",
        };
        match (tag, items.get(1)) {
            (b"A", Some(token)) => int(token)
                .map(|t| {
                    Begin::Acquired(Lease {
                        token: FencingToken(t),
                        duration: lease,
                    })
                })
                .ok_or_else(|| StoreError::corrupt("redis begin: token is not an integer")),
            (b"I", Some(left)) => int(left)
                .map(|left| Begin::InFlight {
                    retry_after: Duration::from_micros(left),
                })
                .ok_or_else(|| StoreError::corrupt("redis begin: time left is not an integer")),
            (b"R", Some(Value::BulkString(bytes))) => {
                Ok(Begin::Replay(Outcome::new(bytes.clone())))
            }
            (b"R", Some(Value::SimpleString(s))) => {
                Ok(Begin::Replay(Outcome::new(s.clone().into_bytes())))
            }
            (b"M", None) => Ok(Begin::Mismatch),
            _ => Err(StoreError::corrupt(format!(
                "redis begin: unexpected reply {reply:?}"
            ))),
        }
    }

    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let token = lease.token.0.to_string();
        self.fenced(
            "complete",
            &self.scripts.complete,
            id,
            &[token.as_bytes(), &us(ttl), outcome.as_bytes()],
        )
        .await
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        let token = lease.token.0.to_string();
        self.fenced("release", &self.scripts.release, id, &[token.as_bytes()])
            .await
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        let token = lease.token.0.to_string();
        self.fenced(
            "renew",
            &self.scripts.renew,
            id,
            &[token.as_bytes(), &us(duration)],
        )
        .await?;
        Ok(Lease {
            token: lease.token,
            duration,
        })
    }
}
