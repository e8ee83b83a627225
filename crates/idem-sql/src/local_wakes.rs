//! Waking the duplicates that wait in this process. A database without a
//! notification channel (SQLite, MySQL) cannot say when another process
//! changes a record, so those changes are found by the engine's polling;
//! but a completion, release or removal made by this process wakes its own
//! waiters at once. The record is read once, and what was read is handed to
//! every waiter (a completed record answers them all without a claim each).

use std::future::Future;
use std::time::Duration;

use idem_core::waiters::{Look, Waiters};
use idem_core::{RecordId, RecordInfo};

/// The waiters of one store (shared by its clones and its transactions).
pub(crate) struct LocalWakes {
    waiters: Waiters<RecordId>,
}

impl Default for LocalWakes {
    fn default() -> Self {
        let waiters = Waiters::default();
        // Always "up": woken from this process, polled for the rest.
        waiters.up();
        Self { waiters }
    }
}

impl LocalWakes {
    /// Waits until this process changes `id`, at most `within`.
    pub(crate) async fn wait(&self, id: RecordId, within: Duration) -> Option<RecordInfo> {
        self.waiters
            .wait(id, within, async { Look::InFlight })
            .await
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
}
