//! Waking the duplicates that wait in this process: MySQL has no `LISTEN`,
//! so a change made elsewhere is found by the engine's polling, but a
//! completion, release or removal made by this process wakes its own
//! waiters at once. The record is read once, and what was read is handed to
//! every waiter (a completed record answers them all without a claim each).

use std::sync::Arc;

use idem_core::waiters::{Look, Waiters};
use idem_core::{RecordId, RecordInfo};
use sqlx::mysql::MySqlPool;

use crate::calls;
use crate::sql::Sql;

/// The waiters of one store (shared by its clones and its transactions).
pub(crate) struct Wakes {
    waiters: Waiters<RecordId>,
    pool: MySqlPool,
    sql: Arc<Sql>,
}

impl Wakes {
    pub(crate) fn new(pool: MySqlPool, sql: Arc<Sql>) -> Arc<Self> {
        let waiters = Waiters::default();
        // Always "up": woken from this process, polled for the rest.
        waiters.up();
        Arc::new(Self { waiters, pool, sql })
    }

    /// Waits until this process changes `id`, at most `within`.
    pub(crate) async fn wait(
        &self,
        id: RecordId,
        within: std::time::Duration,
    ) -> Option<RecordInfo> {
        self.waiters
            .wait(id, within, async { Look::InFlight })
            .await
    }

    /// Wakes the waiters of `id`, if any, with one read of the record.
    pub(crate) fn wake(&self, id: &RecordId) {
        let Some(slot) = self.waiters.take(id) else {
            return;
        };
        let (pool, sql, id) = (self.pool.clone(), Arc::clone(&self.sql), *id);
        tokio::spawn(async move {
            slot.wake(calls::inspect(&pool, &sql, &id).await.ok().flatten());
        });
    }
}
