//! Connecting a [`RedisStore`]: to one server, to the primary Sentinel
//! names, or to a cluster, after checking that the server keeps records for
//! their whole TTL (its `maxmemory-policy`; see [`Connector::accept_eviction`]).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::cluster::ClusterClient;

use crate::eviction::{refusal, Eviction};
use crate::sentinel::{manager_config, Followed};
use crate::wake::{Server, Wakes};
use crate::wire::Connection;
use crate::{channel, RedisStore, DEFAULT_TIMEOUT};

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
    /// The server may evict idem's records before their TTL, and the
    /// connector was not told to accept that.
    #[error("{}", refusal(.policy))]
    EvictionPolicy {
        /// The server's `maxmemory-policy`.
        policy: String,
    },
}

/// How a [`RedisStore`] connects. [`RedisStore::connect`] and its siblings
/// are this with the defaults.
///
/// ```no_run
/// # async fn demo() -> Result<(), idem_redis::ConnectError> {
/// // A cache whose records may be evicted early, knowingly.
/// let store = idem_redis::RedisStore::connector()
///     .accept_eviction()
///     .connect("redis://cache.internal:6379")
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Connector {
    accept_eviction: bool,
}

impl Connector {
    /// Connects even if the server's `maxmemory-policy` may evict idem's
    /// records (any policy but `noeviction`), and keeps taking claims if
    /// the policy changes to one later. An evicted record's retry runs its
    /// operation again; evictions the server reports are still counted
    /// ([`RedisStore::evictions_seen`]) and logged.
    #[must_use]
    pub fn accept_eviction(mut self) -> Self {
        self.accept_eviction = true;
        self
    }

    /// Connects to one Redis server (`redis://host:port[/db]`) through a
    /// `ConnectionManager`, which reconnects by itself after a failure.
    pub async fn connect(&self, url: &str) -> Result<RedisStore, ConnectError> {
        let client = redis::Client::open(url).map_err(|e| ConnectError::InvalidUrl(Box::new(e)))?;
        let manager = ConnectionManager::new_with_config(client.clone(), manager_config())
            .await
            .map_err(|e| ConnectError::Unreachable(Box::new(e)))?;
        let mut store = self.store(Connection::Single(manager));
        store.wakes = Some(Arc::new(Wakes::new(Server::Fixed(client), None)));
        store.channel = channel(&store.prefix);
        self.checked(store).await
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
    /// primary acknowledged. Add
    /// [`with_replication`](RedisStore::with_replication) so that no claim
    /// or completion is acted on before replicas have it.
    pub async fn connect_sentinel<I, S>(
        &self,
        sentinels: I,
        service: &str,
    ) -> Result<RedisStore, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let sentinels: Vec<String> = sentinels
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .collect();
        let followed = Arc::new(Followed::connect(&sentinels, service).await?);
        let mut store = self.store(Connection::Sentinel(Arc::clone(&followed)));
        store.wakes = Some(Arc::new(Wakes::new(Server::Followed(followed), None)));
        store.channel = channel(&store.prefix);
        self.checked(store).await
    }

    /// Connects to a Redis Cluster through any of its nodes; the policy of
    /// every node is checked.
    pub async fn connect_cluster<I, S>(&self, nodes: I) -> Result<RedisStore, ConnectError>
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
        self.checked(self.store(Connection::Cluster(connection)))
            .await
    }

    fn store(&self, connection: Connection) -> RedisStore {
        RedisStore::with_connection(connection, Eviction::new(self.accept_eviction))
    }

    /// The store, if its server keeps records for their TTL or eviction is
    /// accepted. A server that does not answer `INFO` (renamed away) is
    /// taken on trust, with a warning.
    async fn checked(&self, store: RedisStore) -> Result<RedisStore, ConnectError> {
        match store.eviction.check(&store.connection).await {
            Ok(reading) => match reading.evicting {
                Some(policy) if !self.accept_eviction => {
                    Err(ConnectError::EvictionPolicy { policy })
                }
                _ => Ok(store),
            },
            Err(e) => {
                tracing::warn!(target: "idem", error = %e, "cannot read the Redis server's maxmemory-policy (INFO memory); idem cannot tell whether it may evict records before their TTL");
                Ok(store)
            }
        }
    }
}
