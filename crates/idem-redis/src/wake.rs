//! Waking duplicates that wait: on one Redis server, every completion,
//! release and removal publishes the record's key on the store's channel
//! (`<prefix>wake`, from the same script, so the wake-up follows the
//! change); one subscribed connection per store wakes that record's
//! waiters ([`Waiters`]). While it is down, waiters poll. (Redis Cluster
//! stores poll: a publish there is broadcast to every node.)

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::StreamExt as _;
use idem_core::waiters::Waiters;
use idem_core::RecordId;

use crate::replay_cache::ReplayCache;
use crate::sentinel::Followed;

/// The waiters of one store, by record key, and its subscription.
pub(crate) struct Wakes {
    server: Server,
    pub(crate) waiters: Waiters<String>,
    /// Completed records replayed in process, forgotten when the channel
    /// says they changed ([`crate::RedisStore::with_replay_cache`]).
    pub(crate) cache: Option<ReplayCache>,
    started: OnceLock<()>,
}

/// Where the subscription connects.
#[derive(Clone)]
pub(crate) enum Server {
    /// One server.
    Fixed(redis::Client),
    /// The primary Sentinel names, asked again at each reconnection.
    Followed(Arc<Followed>),
}

impl Server {
    fn client(&self) -> redis::Client {
        self.generation_and_client().1
    }

    /// A client of the server (behind Sentinel, of the primary it names
    /// now), and which primary that is (`None`: one server).
    pub(crate) fn generation_and_client(&self) -> (Option<u64>, redis::Client) {
        match self {
            Self::Fixed(client) => (None, client.clone()),
            Self::Followed(followed) => {
                let (generation, client) = followed.generation_and_client();
                (Some(generation), client)
            }
        }
    }
}

impl Wakes {
    pub(crate) fn new(server: Server, cache: Option<ReplayCache>) -> Self {
        Self {
            server,
            waiters: Waiters::default(),
            cache,
            started: OnceLock::new(),
        }
    }

    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// Subscribes to `channel` on first use.
    pub(crate) fn start(self: &Arc<Self>, channel: &str) {
        self.started.get_or_init(|| {
            let (wakes, channel) = (Arc::clone(self), channel.to_owned());
            tokio::spawn(async move { wakes.listen(channel).await });
        });
    }

    async fn listen(self: Arc<Self>, channel: String) {
        loop {
            let mut pubsub = match self.server.client().get_async_pubsub().await {
                Ok(pubsub) => pubsub,
                Err(e) => {
                    if let Server::Followed(followed) = &self.server {
                        // The primary may have moved: ask the Sentinels.
                        followed.refresh_soon(followed.connection().0);
                    }
                    tracing::warn!(target: "idem", error = ?e.kind(), "redis wake channel: cannot connect; waiters poll");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Err(e) = pubsub.subscribe(&channel).await {
                tracing::warn!(target: "idem", error = ?e.kind(), "redis wake channel: SUBSCRIBE failed; waiters poll");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            self.waiters.up();
            if let Some(cache) = &self.cache {
                cache.subscribed();
            }
            let mut messages = pubsub.into_on_message();
            while let Some(message) = messages.next().await {
                if let Ok(key) = message.get_payload::<String>() {
                    if let (Some(cache), Some(id)) = (&self.cache, id_in_key(&key)) {
                        cache.changed(&id);
                    }
                    if let Some(slot) = self.waiters.take(&key) {
                        slot.wake(None);
                    }
                }
            }
            if let Some(cache) = &self.cache {
                cache.unsubscribed();
            }
            self.waiters.down();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The record id in a record's key, `<prefix>{<64 hex digits>}`.
fn id_in_key(key: &str) -> Option<RecordId> {
    RecordId::from_hex(key.strip_suffix('}')?.rsplit_once('{')?.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_core::{IdempotencyKey, Scope};

    #[test]
    fn a_records_key_names_its_id() {
        let id = RecordId::new(
            &Scope::new("alice"),
            &IdempotencyKey::parse("k-1").expect("key"),
        );
        let mut key = String::from("payments:{idem}:{");
        id.push_hex(&mut key);
        key.push('}');
        assert_eq!(id_in_key(&key), Some(id));
        assert_eq!(id_in_key("payments:{abc}"), None);
        assert_eq!(id_in_key(&key.replace('}', "")), None);
        assert_eq!(id_in_key(&format!("{{{}}}", "g".repeat(64))), None);
    }
}
