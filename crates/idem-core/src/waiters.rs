//! `Waiters`: the duplicates waiting on records of a store, for stores that
//! wake them when a record changes (see [`Store::changed`](crate::Store::changed)).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::store::RecordInfo;

/// How long a waiter sleeps between looks while the wake channel is down.
pub const POLL_WHILE_DOWN: Duration = Duration::from_millis(100);

/// The waiters of one record, and what the waker read for them.
#[derive(Debug, Default)]
pub struct Slot {
    notify: Arc<Notify>,
    read: OnceLock<Option<RecordInfo>>,
}

impl Slot {
    /// Wakes the record's waiters with what was read of it (`None`: they
    /// look themselves).
    pub fn wake(&self, read: Option<RecordInfo>) {
        let _ = self.read.set(read);
        self.notify.notify_waiters();
    }
}

/// What a waiter finds when it looks at its record after registering.
#[derive(Debug)]
pub enum Look {
    /// Still in flight (and marked, where the store notifies only marked
    /// records): wait to be woken.
    InFlight,
    /// Changed already: this is what it is now, if read.
    Changed(Option<RecordInfo>),
}

/// The waiters of a store, by record `K`, and whether its wake channel is up.
#[derive(Debug)]
pub struct Waiters<K> {
    map: Mutex<HashMap<K, Arc<Slot>>>,
    listening: AtomicBool,
}

impl<K> Default for Waiters<K> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            listening: AtomicBool::new(false),
        }
    }
}

impl<K: Eq + Hash + Clone> Waiters<K> {
    fn map(&self) -> MutexGuard<'_, HashMap<K, Arc<Slot>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether waiters can count on being woken.
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }

    /// The wake channel came up.
    pub fn up(&self) {
        self.listening.store(true, Ordering::SeqCst);
    }

    /// The wake channel went down (changes may have been missed): every
    /// waiter looks again, and polls until it is back.
    pub fn down(&self) {
        self.listening.store(false, Ordering::SeqCst);
        for (_, slot) in self.map().drain() {
            slot.wake(None);
        }
    }

    /// The waiters of `key`, taken to be woken, if any wait.
    pub fn take(&self, key: &K) -> Option<Arc<Slot>> {
        self.map().remove(key)
    }

    /// Waits until `key` changes, at most `within`. The waiter registers
    /// first, then `look`s at the record, so that a change in between is not
    /// missed; while the channel is down it only sleeps. Returns what the
    /// waker (or the look) read of the record, if anything. A waiter that
    /// goes away mid-wait leaves nothing behind.
    pub async fn wait<F>(&self, key: K, within: Duration, look: F) -> Option<RecordInfo>
    where
        F: Future<Output = Look>,
    {
        if !self.listening() {
            tokio::time::sleep(within.min(POLL_WHILE_DOWN)).await;
            return None;
        }
        let slot = Arc::clone(self.map().entry(key.clone()).or_default());
        let mut woken = Box::pin(Arc::clone(&slot.notify).notified_owned());
        woken.as_mut().enable();
        let waiting = Forget {
            waiters: self,
            key,
            slot,
        };
        match look.await {
            Look::Changed(read) => read,
            Look::InFlight => {
                if tokio::time::timeout(within, woken).await.is_ok() {
                    waiting.slot.read.get().cloned().flatten()
                } else {
                    None
                }
            }
        }
    }
}

/// One waiter's hold on its record's slot; dropping it (woken, timed out,
/// or gone away mid-wait) removes the slot once no other waiter holds it.
struct Forget<'a, K: Eq + Hash + Clone> {
    waiters: &'a Waiters<K>,
    key: K,
    slot: Arc<Slot>,
}

impl<K: Eq + Hash + Clone> Drop for Forget<'_, K> {
    fn drop(&mut self) {
        let mut map = self.waiters.map();
        // Two references: the map's and this waiter's.
        let last = map
            .get(&self.key)
            .is_some_and(|s| Arc::ptr_eq(s, &self.slot) && Arc::strong_count(s) == 2);
        if last {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_goes_away_mid_wait_leaves_nothing_behind() {
        let waiters: Waiters<u8> = Waiters::default();
        waiters.up();
        let wait = waiters.wait(1, Duration::from_secs(10), async { Look::InFlight });
        // Gone after a while, as a caller that timed out.
        let _ = tokio::time::timeout(Duration::from_millis(5), wait).await;
        assert!(waiters.take(&1).is_none(), "its slot is gone");
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_get_what_the_waker_read_and_leave_nothing_behind() {
        let waiters: Arc<Waiters<u8>> = Arc::default();
        waiters.up();
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let waiters = Arc::clone(&waiters);
                tokio::spawn(async move {
                    waiters
                        .wait(1, Duration::from_secs(10), async { Look::InFlight })
                        .await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let info = RecordInfo {
            fingerprint: crate::Fingerprint::from_bytes([1; 32]),
            token: crate::FencingToken(7),
            state: crate::RecordInfoState::InFlight {
                lease_left: Duration::ZERO,
            },
        };
        waiters
            .take(&1)
            .expect("three waiters")
            .wake(Some(info.clone()));
        for t in tasks {
            assert_eq!(t.await.expect("waiter"), Some(info.clone()));
        }
        assert!(waiters.take(&1).is_none());
    }
}
