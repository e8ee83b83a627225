//! Checks for the bug classes that made other idempotency libraries run
//! operations twice, found there by a model of the record lifecycle. Each is
//! also a broken transition function that the repository's model checker
//! must catch (`tests/tests/protocol_model.rs`); here every store proves it
//! does not have the bug against its real backend.

use std::sync::Arc;
use std::time::Duration;

use super::support::{acquire, expect_lease_lost, fp, fresh_id, race, LONG, TTL};
use crate::store::{Begin, Outcome, Store};

/// Stale-snapshot takeover: when a lease has run out, 16 callers race to take
/// the record over; exactly one wins (a takeover decided on what each read
/// earlier would let several win), and its completion is never overwritten
/// by the others' late begins.
pub async fn expired_record_is_taken_over_once(store: Arc<dyn Store>) {
    let id = fresh_id("stale-takeover");
    let _abandoned = acquire(&*store, &id, 1, Duration::from_millis(200)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut winners = Vec::new();
    for answer in race(&store, id, 16).await {
        match answer {
            Ok(Begin::Acquired(lease)) => winners.push(lease),
            Ok(Begin::InFlight { .. }) => {}
            other => panic!("a racing takeover answered {other:?}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one of 16 racing callers may take an expired record over"
    );
    let out = Outcome::new(b"winner".to_vec());
    store
        .complete(&id, &winners[0], &out, TTL)
        .await
        .expect("the winner completes");
    for _ in 0..4 {
        match store.begin(&id, &fp(1), LONG).await {
            Ok(Begin::Replay(o)) => assert!(o == out, "the completion must stay"),
            other => panic!("after the takeover's completion, expected a replay, got {other:?}"),
        }
    }
}

/// In flight without a deadline: a claim whose holder keeps renewing it is
/// never treated as abandoned, however long it runs.
pub async fn renewed_claim_is_never_abandoned(store: Arc<dyn Store>) {
    let id = fresh_id("no-deadline");
    let lease_len = Duration::from_millis(400);
    let mut lease = acquire(&*store, &id, 1, lease_len).await;
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        lease = store
            .renew(&id, &lease, lease_len)
            .await
            .expect("the holder renews in time");
        match store.begin(&id, &fp(1), lease_len).await {
            Ok(Begin::InFlight { .. }) => {}
            other => panic!("a renewed claim must stay in flight, got {other:?}"),
        }
    }
}

/// Fingerprint dropped at completion: after completion, the identical
/// request is replayed (not refused as another request), and another
/// request under the key is still refused.
pub async fn completion_keeps_the_fingerprint(store: Arc<dyn Store>) {
    let id = fresh_id("keeps-fp");
    let lease = acquire(&*store, &id, 7, LONG).await;
    let out = Outcome::new(b"done".to_vec());
    store
        .complete(&id, &lease, &out, TTL)
        .await
        .expect("complete");
    match store.begin(&id, &fp(7), LONG).await {
        Ok(Begin::Replay(o)) => assert!(o == out, "the identical request gets the outcome"),
        other => panic!("the identical request must be replayed, got {other:?}"),
    }
    match store.begin(&id, &fp(8), LONG).await {
        Ok(Begin::Mismatch) => {}
        other => panic!("another request under the key must be refused, got {other:?}"),
    }
}

/// Mutated input completing another record: a completion addressed to a
/// record the lease was not granted on fails and writes nothing there, and
/// the claimed record stays in flight for its holder to complete.
pub async fn completion_of_another_record_is_refused(store: Arc<dyn Store>) {
    let (claimed, other) = (fresh_id("claimed"), fresh_id("mutated"));
    let lease = acquire(&*store, &claimed, 1, LONG).await;
    expect_lease_lost(
        "a completion addressed to a record that was never claimed",
        store.complete(&other, &lease, &Outcome::new(b"x".to_vec()), TTL),
    )
    .await;
    match store.begin(&other, &fp(1), LONG).await {
        Ok(Begin::Acquired(_)) => {}
        other => panic!("the record that was never claimed must be free, got {other:?}"),
    }
    match store.begin(&claimed, &fp(1), LONG).await {
        Ok(Begin::InFlight { .. }) => {}
        other => panic!("the claimed record must still be in flight, got {other:?}"),
    }
    store
        .complete(&claimed, &lease, &Outcome::new(b"ok".to_vec()), TTL)
        .await
        .expect("its holder completes it");
}

/// Keyless sharing: requests under different keys never meet, even when
/// their requests are identical and one of them is in flight or completed.
pub async fn different_keys_never_share_a_record(store: Arc<dyn Store>) {
    let (a, b) = (fresh_id("key-a"), fresh_id("key-b"));
    let la = acquire(&*store, &a, 1, LONG).await;
    // B, the identical request under another key, is not in flight behind A.
    let lb = acquire(&*store, &b, 1, LONG).await;
    store
        .complete(&a, &la, &Outcome::new(b"A".to_vec()), TTL)
        .await
        .expect("complete a");
    store
        .complete(&b, &lb, &Outcome::new(b"B".to_vec()), TTL)
        .await
        .expect("complete b");
    match store.begin(&b, &fp(1), LONG).await {
        Ok(Begin::Replay(o)) => {
            assert!(o == Outcome::new(b"B".to_vec()), "b keeps its own outcome");
        }
        other => panic!("expected b's replay, got {other:?}"),
    }
}
