//! The store's `LISTEN`: a waiter marks the record (`waiting`); a
//! completion, release or removal of a marked record notifies the store's
//! channel (`pg_notify`, delivered at commit); one connection per store
//! listens, and each record it names is read once for all of that record's
//! waiters. While that connection is down, waiters poll.

use std::time::Duration;

use idem_core::RecordId;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};

use crate::dialect::{Heard, Listener};
use crate::postgres::pg_store::Listen;

/// Listens on `channel` until the process ends: on a connection of `pool`'s
/// options, or of the direct options `listen` gives, reconnecting after a
/// pause whenever the connection is lost.
pub(crate) async fn listen(pool: PgPool, listen: Listen, channel: &str, heard: &Listener) {
    // A pool of one for the listener alone, connecting lazily.
    let pool = match listen {
        Listen::Direct(options) => PgPoolOptions::new()
            .max_connections(1)
            .connect_lazy_with((*options).clone()),
        Listen::Pool | Listen::Off => pool,
    };
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(target: "idem", error = %e, "postgres wake channel: cannot connect; waiters poll");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(channel).await {
            tracing::warn!(target: "idem", error = %e, "postgres wake channel: LISTEN failed; waiters poll");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        heard(Heard::Up);
        while let Ok(Some(note)) = listener.try_recv().await {
            if let Some(id) = RecordId::from_hex(note.payload()) {
                heard(Heard::Changed(id));
            }
        }
        heard(Heard::Down);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
