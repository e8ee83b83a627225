//! Waking duplicates that wait: a waiter marks the record (`waiting`); a
//! completion, release or removal of a marked record notifies the store's
//! channel (`pg_notify`, delivered at commit); one `LISTEN` connection per
//! store reads the record it names once and hands what it read to all of
//! that record's waiters ([`Waiters`]). While that connection is down,
//! waiters poll.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use idem_core::waiters::Waiters;
use idem_core::RecordId;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};

use crate::calls;
use crate::sql::Sql;

/// The waiters of one store (shared by its clones) and its listener.
#[derive(Default)]
pub(crate) struct Wakes {
    pub(crate) waiters: Waiters<RecordId>,
    started: OnceLock<()>,
}

impl Wakes {
    /// Starts the listener on first use: on a connection with `direct`'s
    /// options if given, else with the pool's.
    pub(crate) fn start(
        self: &Arc<Self>,
        pool: &PgPool,
        direct: Option<&Arc<PgConnectOptions>>,
        sql: &Arc<Sql>,
    ) {
        self.started.get_or_init(|| {
            let (wakes, pool, sql) = (Arc::clone(self), pool.clone(), Arc::clone(sql));
            // A pool of one for the listener alone, connecting lazily.
            let listen_pool = direct.map(|options| {
                PgPoolOptions::new()
                    .max_connections(1)
                    .connect_lazy_with(PgConnectOptions::clone(options))
            });
            tokio::spawn(async move { wakes.listen(pool, listen_pool, sql).await });
        });
    }

    async fn listen(self: Arc<Self>, pool: PgPool, listen_pool: Option<PgPool>, sql: Arc<Sql>) {
        loop {
            let mut listener = match PgListener::connect_with(listen_pool.as_ref().unwrap_or(&pool))
                .await
            {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(target: "idem", error = %e, "postgres wake channel: cannot connect; waiters poll");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Err(e) = listener.listen(&sql.channel).await {
                tracing::warn!(target: "idem", error = %e, "postgres wake channel: LISTEN failed; waiters poll");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            self.waiters.up();
            while let Ok(Some(note)) = listener.try_recv().await {
                self.waiters.up();
                self.wake(note.payload(), &pool, &sql);
            }
            self.waiters.down();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reads the record once, off the listening task, and wakes its waiters
    /// with what was read.
    fn wake(&self, hex: &str, pool: &PgPool, sql: &Arc<Sql>) {
        let Some(id) = RecordId::from_hex(hex) else {
            return;
        };
        let Some(slot) = self.waiters.take(&id) else {
            return;
        };
        let (pool, sql) = (pool.clone(), Arc::clone(sql));
        tokio::spawn(async move {
            slot.wake(calls::inspect(&pool, &sql, &id).await.ok().flatten());
        });
    }
}
