//! A store's expired records deleted by a background task, in bounded
//! batches (for stores whose records stay until deleted: SQL tables).

use std::future::Future;
use std::time::Duration;

use crate::store_error::StoreError;

/// Every `every`, calls `purge(batch)` until a call deletes fewer than
/// `batch` records (so that one pass never holds many locks at once), until
/// the returned handle is aborted or dropped with the runtime. A failed pass
/// is logged and tried again at the next tick. `store` names the store in
/// the logs.
pub fn spawn_purger<F, Fut>(
    store: &'static str,
    every: Duration,
    batch: u32,
    purge: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(u32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<u64, StoreError>> + Send,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let mut purged = 0;
            loop {
                match purge(batch).await {
                    Ok(n) => {
                        purged += n;
                        if n < u64::from(batch) {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(target: "idem", store, error = %e, "purge of expired records failed");
                        break;
                    }
                }
            }
            if purged > 0 {
                tracing::debug!(target: "idem", store, purged, "purged expired records");
            }
        }
    })
}
