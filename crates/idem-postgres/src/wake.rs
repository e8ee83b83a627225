//! Waking duplicates that wait: every completion, release and removal
//! notifies the store's channel (`pg_notify`, delivered at commit); one
//! `LISTEN` connection per store reads the record it names once and hands
//! what it read to all of that record's waiters. While that connection is
//! down, waiters poll.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use idem_core::{RecordId, RecordInfo};
use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::Notify;

use crate::sql::{self, Sql};

/// The waiters of one record, and what was read for them when it changed.
#[derive(Default)]
pub(crate) struct Slot {
    notify: Arc<Notify>,
    read: OnceLock<Option<RecordInfo>>,
}

impl Slot {
    /// What the waker read, once woken (`None` if it could not read).
    pub(crate) fn read(&self) -> Option<RecordInfo> {
        self.read.get().cloned().flatten()
    }
}

/// How long a waiter sleeps between looks while the channel is down.
const POLL: Duration = Duration::from_millis(100);

/// The waiters of one store (shared by its clones) and its listener.
#[derive(Default)]
pub(crate) struct Wakes {
    waiters: Mutex<HashMap<RecordId, Arc<Slot>>>,
    /// Whether the listener is connected and listening.
    listening: AtomicBool,
    started: OnceLock<()>,
}

impl Wakes {
    fn waiters(&self) -> MutexGuard<'_, HashMap<RecordId, Arc<Slot>>> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the listener on first use.
    pub(crate) fn start(self: &Arc<Self>, pool: &PgPool, sql: &Arc<Sql>) {
        self.started.get_or_init(|| {
            let (wakes, pool, sql) = (Arc::clone(self), pool.clone(), Arc::clone(sql));
            tokio::spawn(async move { wakes.listen(pool, sql).await });
        });
    }

    async fn listen(self: Arc<Self>, pool: PgPool, sql: Arc<Sql>) {
        let channel = sql.channel.clone();
        loop {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(target: "idem", error = %e, "postgres wake channel: cannot connect; waiters poll");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Err(e) = listener.listen(&channel).await {
                tracing::warn!(target: "idem", error = %e, "postgres wake channel: LISTEN failed; waiters poll");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            self.listening.store(true, Ordering::SeqCst);
            while let Ok(Some(note)) = listener.try_recv().await {
                self.listening.store(true, Ordering::SeqCst);
                self.wake(note.payload(), &pool, &sql);
            }
            // Lost (notifications may have been missed): everyone looks
            // again, and polls until the channel is back.
            self.listening.store(false, Ordering::SeqCst);
            self.wake_all();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reads the record once, off the listening task, and wakes its waiters
    /// with what was read.
    fn wake(&self, hex: &str, pool: &PgPool, sql: &Arc<Sql>) {
        let Some(id) = parse_id(hex) else { return };
        let Some(slot) = self.waiters().remove(&id) else {
            return;
        };
        let (pool, sql) = (pool.clone(), Arc::clone(sql));
        tokio::spawn(async move {
            let read = sql::inspect(&pool, &sql, &id).await.ok().flatten();
            let _ = slot.read.set(read);
            slot.notify.notify_waiters();
        });
    }

    fn wake_all(&self) {
        for (_, slot) in self.waiters().drain() {
            let _ = slot.read.set(None);
            slot.notify.notify_waiters();
        }
    }

    /// Whether waiters can count on being woken.
    pub(crate) fn listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }

    /// What to wait on for `id`, registered before the caller looks at the
    /// record again, so that a change in between is not missed.
    pub(crate) fn register(&self, id: RecordId) -> Registered {
        let slot = Arc::clone(self.waiters().entry(id).or_default());
        let mut woken = Box::pin(Arc::clone(&slot.notify).notified_owned());
        woken.as_mut().enable();
        Registered { slot, woken }
    }

    /// Forgets `id`'s waiters once none waits (a timed-out wait).
    pub(crate) fn forget(&self, id: &RecordId) {
        let mut waiters = self.waiters();
        if waiters.get(id).is_some_and(|n| Arc::strong_count(n) == 1) {
            waiters.remove(id);
        }
    }

    /// The pause while the channel is down.
    pub(crate) fn poll(within: Duration) -> Duration {
        within.min(POLL)
    }
}

/// A waiter, registered: its record's slot and the wake-up to await.
pub(crate) struct Registered {
    pub(crate) slot: Arc<Slot>,
    pub(crate) woken: std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>,
}

fn parse_id(hex: &str) -> Option<RecordId> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut id = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(RecordId::from_bytes(id))
}
