//! What the checks share: fresh record ids, fingerprints, and helpers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fingerprint::Fingerprint;
use crate::key::{IdempotencyKey, RecordId, Scope};
use crate::store::{Begin, Lease, Store, StoreErrorKind};

/// A record id no other check, test process or earlier run uses.
pub fn fresh_id(label: &str) -> RecordId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let scope = Scope::new(format!("conformance/{}/{nanos}/{n}", std::process::id()));
    let key = IdempotencyKey::parse(label)
        .unwrap_or_else(|_| IdempotencyKey::parse("conformance").expect("a valid literal key"));
    RecordId::new(&scope, &key)
}

/// A fingerprint for test request number `n`.
pub fn fp(n: u8) -> Fingerprint {
    Fingerprint::builder("conformance")
        .bytes("n", &[n])
        .finish()
}

pub(crate) const LONG: Duration = Duration::from_secs(30);
pub(crate) const TTL: Duration = Duration::from_mins(10);

pub(crate) async fn acquire(
    store: &dyn Store,
    id: &crate::RecordId,
    n: u8,
    lease: Duration,
) -> Lease {
    match store.begin(id, &fp(n), lease).await {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!("begin on a free record must answer Acquired, got {other:?}"),
    }
}

pub(crate) async fn expect_lease_lost<T: std::fmt::Debug>(
    what: &str,
    result: impl std::future::Future<Output = Result<T, crate::StoreError>>,
) {
    match result.await {
        Err(e) if e.kind() == StoreErrorKind::LeaseLost => {}
        other => panic!("{what} must fail with LeaseLost, got {other:?}"),
    }
}

/// `n` callers begin `id` at once (behind a barrier); their answers.
pub(crate) async fn race(
    store: &Arc<dyn Store>,
    id: RecordId,
    n: usize,
) -> Vec<Result<Begin, crate::StoreError>> {
    let start = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (store, start) = (Arc::clone(store), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            store.begin(&id, &fp(1), LONG).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("begin task panicked"));
    }
    answers
}
