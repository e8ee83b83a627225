//! Late retries: a completed record's trace refuses a retry after its
//! lifetime until the trace ends or an operator removes it.

use std::sync::Arc;
use std::time::Duration;

use crate::store::{Begin, Outcome, Store};

use super::support::{acquire, fp, fresh_id, LONG};

/// A completed record's outcome is forgotten when its TTL passes, but a
/// trace of it stays (the stores' default, a day): a late retry is
/// refused as `Expired`, another request under the key is a mismatch,
/// and only an operator's removal frees the key at once.
pub async fn a_late_retry_is_refused_until_the_trace_is_removed(store: Arc<dyn Store>) {
    let id = fresh_id("ttl");
    let lease = acquire(&*store, &id, 1, LONG).await;
    store
        .complete(
            &id,
            &lease,
            &Outcome::new(b"short-lived".to_vec()),
            Duration::from_millis(300),
        )
        .await
        .expect("complete must succeed");
    let got = store.begin(&id, &fp(1), LONG).await;
    assert!(
        matches!(got, Ok(Begin::Replay(_))),
        "before the TTL the record replays, got {got:?}"
    );
    let mut got = store.begin(&id, &fp(1), LONG).await;
    for _ in 0..100 {
        if !matches!(got, Ok(Begin::Replay(_))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        got = store.begin(&id, &fp(1), LONG).await;
    }
    assert!(
        matches!(got, Ok(Begin::Expired)),
        "after the TTL a retry is refused as expired, not run again, got {got:?}"
    );
    let got = store.begin(&id, &fp(2), LONG).await;
    assert!(
        matches!(got, Ok(Begin::Mismatch)),
        "after the TTL another request under the key is a mismatch, got {got:?}"
    );
    let removed = store.remove(&id, false).await;
    assert!(
        matches!(removed, Ok(crate::Removal::Removed)),
        "an operator removes the trace, got {removed:?}"
    );
    let got = store.begin(&id, &fp(2), LONG).await;
    assert!(
        matches!(got, Ok(Begin::Acquired(_))),
        "once the trace is removed any request acquires, got {got:?}"
    );
}
