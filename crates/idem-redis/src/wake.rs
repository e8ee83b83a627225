//! Waking duplicates that wait: on one Redis server, every completion,
//! release and removal publishes the record's key on the store's channel
//! (`<prefix>wake`, from the same script, so the wake-up follows the
//! change); one subscribed connection per store wakes that record's
//! waiters. While it is down, waiters poll. (Redis Cluster stores poll: a
//! publish there is broadcast to every node.)

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

/// How long a waiter sleeps between looks while the channel is down.
const POLL: Duration = Duration::from_millis(100);

/// The waiters of one store and its subscription.
pub(crate) struct Wakes {
    client: redis::Client,
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    listening: AtomicBool,
    started: OnceLock<()>,
}

impl Wakes {
    pub(crate) fn new(client: redis::Client) -> Self {
        Self {
            client,
            waiters: Mutex::default(),
            listening: AtomicBool::new(false),
            started: OnceLock::new(),
        }
    }

    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    fn waiters(&self) -> MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
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
            let mut pubsub = match self.client.get_async_pubsub().await {
                Ok(pubsub) => pubsub,
                Err(e) => {
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
            self.listening.store(true, Ordering::SeqCst);
            let mut messages = pubsub.into_on_message();
            while let Some(message) = messages.next().await {
                if let Ok(key) = message.get_payload::<String>() {
                    if let Some(waiting) = self.waiters().remove(&key) {
                        waiting.notify_waiters();
                    }
                }
            }
            // Lost (messages may have been missed): everyone looks again,
            // and polls until the channel is back.
            self.listening.store(false, Ordering::SeqCst);
            for (_, waiting) in self.waiters().drain() {
                waiting.notify_waiters();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether waiters can count on being woken.
    pub(crate) fn listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }

    /// What to wait on for the record at `key`, registered before the caller
    /// looks at the record again, so that a change in between is not missed.
    pub(crate) fn register(&self, key: String) -> Pin<Box<OwnedNotified>> {
        let notify = Arc::clone(self.waiters().entry(key).or_default());
        let mut woken = Box::pin(notify.notified_owned());
        woken.as_mut().enable();
        woken
    }

    /// Forgets the waiters of `key` once none waits.
    pub(crate) fn forget(&self, key: &str) {
        let mut waiters = self.waiters();
        if waiters.get(key).is_some_and(|n| Arc::strong_count(n) == 1) {
            waiters.remove(key);
        }
    }

    /// The pause while the channel is down.
    pub(crate) fn poll(within: Duration) -> Duration {
        within.min(POLL)
    }
}
