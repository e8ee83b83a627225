//! Waking the duplicates that wait. A completion, release or removal made
//! by this process wakes its own waiters at once. Changes made by other
//! processes are heard on the database's notification channel where it has
//! one (PostgreSQL's `LISTEN`); without one (SQLite, MySQL), or while it is
//! down, they are found by polling. The record is read once, and what was
//! read is handed to every waiter (a completed record answers them all
//! without a claim each).

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use idem_core::waiters::{Look, Waiters};
use idem_core::{RecordId, RecordInfo};

use crate::dialect::Heard;

/// The waiters of one store (shared by its clones and its transactions),
/// and whether its channel's listener was started.
pub(crate) struct Wakes {
    waiters: Waiters<RecordId>,
    listener: OnceLock<()>,
}

impl Wakes {
    /// Without a channel: always "up", woken from this process, polled for
    /// the rest.
    pub(crate) fn local() -> Self {
        let waiters = Waiters::default();
        waiters.up();
        Self {
            waiters,
            listener: OnceLock::new(),
        }
    }

    /// With a channel: waiters poll until its listener is up.
    pub(crate) fn channel() -> Self {
        Self {
            waiters: Waiters::default(),
            listener: OnceLock::new(),
        }
    }

    /// Runs `start` (which spawns the channel's listener) the first time
    /// only.
    pub(crate) fn listen_once(&self, start: impl FnOnce()) {
        self.listener.get_or_init(start);
    }

    /// Waits until `id` changes, at most `within`, after `look`ing at it
    /// once registered.
    pub(crate) async fn wait(
        &self,
        id: RecordId,
        within: Duration,
        look: impl Future<Output = Look>,
    ) -> Option<RecordInfo> {
        self.waiters.wait(id, within, look).await
    }

    /// Wakes the waiters of `id`, if any, with what `read` reads of it, read
    /// once off the caller's task.
    pub(crate) fn wake<F>(&self, id: &RecordId, read: impl FnOnce() -> F)
    where
        F: Future<Output = Option<RecordInfo>> + Send + 'static,
    {
        let Some(slot) = self.waiters.take(id) else {
            return;
        };
        let read = read();
        tokio::spawn(async move { slot.wake(read.await) });
    }

    /// What the channel said: up, down, or a record changed (whose waiters
    /// `read` reads it for).
    pub(crate) fn heard<F>(&self, heard: Heard, read: impl FnOnce(RecordId) -> F)
    where
        F: Future<Output = Option<RecordInfo>> + Send + 'static,
    {
        match heard {
            Heard::Up => self.waiters.up(),
            Heard::Down => self.waiters.down(),
            Heard::Changed(id) => {
                self.waiters.up();
                self.wake(&id, || read(id));
            }
        }
    }
}
