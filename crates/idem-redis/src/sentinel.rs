//! Following the primary that Redis Sentinel names: the store talks to the
//! primary through a `ConnectionManager` (which reconnects to the same
//! address), and when a call fails in a way that may mean the primary moved
//! (the connection dropped or was refused, `READONLY` from a demoted
//! primary, `MASTERDOWN`, `LOADING`, or no answer in time), it asks the
//! Sentinels for the primary again and, if it moved, switches every later
//! call to the new one. The failing call itself fails (a transient store
//! error: nothing ran, the client retries); it is never resent, since a
//! resent claim could answer "in flight" to its own sender.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelServerType};

use crate::ConnectError;

/// The primary the Sentinels named last, and how to ask them again.
pub(crate) struct Followed {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    current: RwLock<Current>,
}

struct Current {
    /// Bumped at each switch, so that one failure triggers one lookup.
    generation: u64,
    address: String,
    client: redis::Client,
    connection: ConnectionManager,
}

/// How long asking the Sentinels and connecting to the primary may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        // Every store call runs under the store's own timeout
        // (`with_timeout`); a second timer per command would only cost.
        .set_response_timeout(None)
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200))
}

impl Followed {
    /// Asks the Sentinels at `sentinels` for the primary of `service` and
    /// connects to it.
    pub(crate) async fn connect(sentinels: &[String], service: &str) -> Result<Self, ConnectError> {
        let client = SentinelClient::build(
            sentinels.to_vec(),
            service.to_owned(),
            None,
            SentinelServerType::Master,
        )
        .map_err(|e| ConnectError::InvalidUrl(Box::new(e)))?;
        let sentinels = tokio::sync::Mutex::new(client);
        let current = {
            let mut asked = sentinels.lock().await;
            look_up(&mut asked)
                .await
                .map_err(|e| ConnectError::Unreachable(e.into()))?
        };
        Ok(Self {
            sentinels,
            current: RwLock::new(current),
        })
    }

    fn current(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The connection to the primary, and its generation (on every call:
    /// only these two are cloned).
    pub(crate) fn connection(&self) -> (u64, ConnectionManager) {
        let current = self.current();
        (current.generation, current.connection.clone())
    }

    /// A client of the primary, and its generation (for the wake
    /// channel's subscription, and the replication rounds' connection).
    pub(crate) fn generation_and_client(&self) -> (u64, redis::Client) {
        let current = self.current();
        (current.generation, current.client.clone())
    }

    /// After a failure of a call made on `generation`'s connection: asks
    /// the Sentinels again, once per generation, and switches if the primary
    /// moved.
    pub(crate) async fn refresh(&self, generation: u64) {
        let mut sentinels = self.sentinels.lock().await;
        if self.current().generation != generation {
            return; // Another failure already looked.
        }
        match look_up(&mut sentinels).await {
            Ok(found) => {
                let mut current = self
                    .current
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if found.address != current.address {
                    tracing::warn!(target: "idem", from = %current.address, to = %found.address, "redis primary moved (Sentinel); following it");
                }
                *current = Current {
                    generation: generation + 1,
                    ..found
                };
            }
            Err(e) => {
                tracing::warn!(target: "idem", error = %e, "redis Sentinel lookup failed; the store stays unavailable until it succeeds");
            }
        }
    }

    /// [`refresh`](Self::refresh) on a task of its own, so that the failing
    /// call answers at once.
    pub(crate) fn refresh_soon(self: &Arc<Self>, generation: u64) {
        let followed = Arc::clone(self);
        tokio::spawn(async move { followed.refresh(generation).await });
    }
}

/// The primary the Sentinels name now, connected.
async fn look_up(sentinels: &mut SentinelClient) -> Result<Current, String> {
    let lookup = async {
        let client = sentinels
            .async_get_client()
            .await
            .map_err(|e| format!("no Sentinel named a primary: {e}"))?;
        let address = client.get_connection_info().addr().to_string();
        let connection = ConnectionManager::new_with_config(client.clone(), manager_config())
            .await
            .map_err(|e| format!("cannot connect to the primary {address}: {e}"))?;
        Ok(Current {
            generation: 0,
            address,
            client,
            connection,
        })
    };
    tokio::time::timeout(LOOKUP_TIMEOUT, lookup)
        .await
        .map_err(|_| format!("the Sentinels did not name a primary within {LOOKUP_TIMEOUT:?}"))?
}

/// Whether `e` may mean that the primary moved.
pub(crate) fn may_have_moved(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::ReadOnly
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
            )
        )
}
