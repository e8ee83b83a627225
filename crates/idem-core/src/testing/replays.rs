//! Replays byte for byte, up to the largest outcome the store under check
//! keeps (one mebibyte unless its kit was told otherwise).

use std::future::Future;
use std::sync::Arc;

use crate::store::{Begin, Outcome, Store, StoreErrorKind};

use super::support::{acquire, fp, fresh_id, LONG, TTL};

/// The largest outcome every store keeps unless it says otherwise.
pub(crate) const DEFAULT_LARGEST: usize = 1 << 20;

tokio::task_local! {
    /// The largest outcome the store under check keeps, in bytes.
    static LARGEST_OUTCOME: usize;
}

/// Runs `check` for a store that keeps outcomes of at most `largest` bytes.
pub(crate) fn keeping<F: Future>(largest: usize, check: F) -> impl Future<Output = F::Output> {
    LARGEST_OUTCOME.scope(largest, check)
}

fn largest() -> usize {
    LARGEST_OUTCOME.try_with(|n| *n).unwrap_or(DEFAULT_LARGEST)
}

/// `len` bytes that are not a repeating pattern.
fn scattered(len: usize) -> Vec<u8> {
    (0..u32::try_from(len).unwrap_or(u32::MAX))
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

/// The recorded outcome comes back byte for byte: every byte value, empty,
/// and the largest the store keeps (one mebibyte, or the store's limit). A
/// store with a limit refuses one byte more as full, not cut short, and
/// the claim stays its holder's.
pub async fn replay_is_byte_identical(store: Arc<dyn Store>) {
    let all_bytes: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let largest = largest();
    for (label, bytes) in [
        ("bytes", all_bytes),
        ("empty", Vec::new()),
        ("big", scattered(largest)),
    ] {
        let id = fresh_id(label);
        let lease = acquire(&*store, &id, 1, LONG).await;
        let outcome = Outcome::new(bytes);
        store
            .complete(&id, &lease, &outcome, TTL)
            .await
            .unwrap_or_else(|e| panic!("complete by the holder must succeed ({label}): {e}"));
        for _ in 0..2 {
            match store.begin(&id, &fp(1), LONG).await {
                Ok(Begin::Replay(got)) => assert!(
                    got == outcome,
                    "replay must return the recorded outcome byte for byte ({label}: {} bytes \
                     recorded, {} returned)",
                    outcome.len(),
                    got.len()
                ),
                other => panic!("begin after completion must replay ({label}), got {other:?}"),
            }
        }
    }
    if largest < DEFAULT_LARGEST {
        let id = fresh_id("too-big");
        let lease = acquire(&*store, &id, 1, LONG).await;
        let refused = store
            .complete(&id, &lease, &Outcome::new(scattered(largest + 1)), TTL)
            .await;
        assert!(
            matches!(&refused, Err(e) if e.kind() == StoreErrorKind::Full),
            "an outcome a byte over the store's {largest} must be refused as full, got {refused:?}"
        );
        store
            .release(&id, &lease)
            .await
            .expect("the claim stays its holder's after a refused outcome");
    }
}
