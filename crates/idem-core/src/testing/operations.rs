//! Checks of the operators' calls: looking a record up and removing it.

use std::sync::Arc;
use std::time::Duration;

use super::support::{acquire, expect_lease_lost, fp, fresh_id, LONG, TTL};
use crate::store::{Begin, Outcome, RecordInfoState, Removal, Store};

/// `inspect` shows nothing for a free record, then the claim (fingerprint,
/// token, lease left), then the completion (outcome, time left).
pub async fn inspect_shows_the_record(store: Arc<dyn Store>) {
    let id = fresh_id("inspect");
    assert_eq!(
        store.inspect(&id).await.expect("inspect"),
        None,
        "no record yet"
    );
    let lease = acquire(&*store, &id, 3, LONG).await;
    let info = store.inspect(&id).await.expect("inspect").expect("a claim");
    assert!(info.fingerprint == fp(3), "the claim's fingerprint");
    assert_eq!(info.token, lease.token, "the claim's token");
    match info.state {
        RecordInfoState::InFlight { lease_left } => assert!(
            lease_left > Duration::ZERO && lease_left <= LONG,
            "lease left {lease_left:?}"
        ),
        other @ RecordInfoState::Completed { .. } => panic!("expected in flight, got {other:?}"),
    }
    let out = Outcome::new(b"shown".to_vec());
    store
        .complete(&id, &lease, &out, TTL)
        .await
        .expect("complete");
    match store.inspect(&id).await.expect("inspect").map(|i| i.state) {
        Some(RecordInfoState::Completed {
            expires_in,
            outcome,
        }) => {
            assert!(outcome == out, "the recorded outcome");
            assert!(
                expires_in > Duration::ZERO && expires_in <= TTL,
                "expires in {expires_in:?}"
            );
        }
        other => panic!("expected the completion, got {other:?}"),
    }
}

/// Removing an in-flight record is refused unless forced (its holder may
/// still run); forced, the next request runs under a greater token and the
/// old holder is fenced off.
pub async fn remove_refuses_a_claim_unless_forced(store: Arc<dyn Store>) {
    let id = fresh_id("remove-claim");
    let old = acquire(&*store, &id, 1, LONG).await;
    assert_eq!(
        store.remove(&id, false).await.expect("remove"),
        Removal::RefusedInFlight
    );
    assert!(
        matches!(
            store.begin(&id, &fp(1), LONG).await,
            Ok(Begin::InFlight { .. })
        ),
        "a refused removal changes nothing"
    );
    assert_eq!(
        store.remove(&id, true).await.expect("forced remove"),
        Removal::Removed
    );
    let new = acquire(&*store, &id, 1, LONG).await;
    assert!(new.token > old.token, "the next claim's token is greater");
    expect_lease_lost(
        "complete by the holder of a removed claim",
        store.complete(&id, &old, &Outcome::new(b"late".to_vec()), TTL),
    )
    .await;
}

/// Removing a completed record lets its key run again; removing nothing
/// says so.
pub async fn remove_of_a_completion_lets_the_key_run_again(store: Arc<dyn Store>) {
    let id = fresh_id("remove-done");
    let first = acquire(&*store, &id, 1, LONG).await;
    store
        .complete(&id, &first, &Outcome::new(b"old".to_vec()), TTL)
        .await
        .expect("complete");
    assert_eq!(
        store.remove(&id, false).await.expect("remove"),
        Removal::Removed
    );
    assert_eq!(store.inspect(&id).await.expect("inspect"), None, "gone");
    assert_eq!(
        store.remove(&id, false).await.expect("remove again"),
        Removal::Absent
    );
    let again = acquire(&*store, &id, 2, LONG).await;
    assert!(again.token > first.token, "tokens keep growing");
}

/// A completed record answers the same replay, and a mismatch for another
/// fingerprint, however often and however late it is asked (a store may
/// answer later ones from a cache); a removal ends it at once for the store
/// that made it: the next begin acquires.
pub async fn replays_repeat_until_the_record_is_removed(store: Arc<dyn Store>) {
    let id = fresh_id("repeat");
    let first = acquire(&*store, &id, 1, LONG).await;
    let outcome = Outcome::new(b"receipt".to_vec());
    store
        .complete(&id, &first, &outcome, TTL)
        .await
        .expect("complete");
    for round in 0..5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        match store.begin(&id, &fp(1), LONG).await {
            Ok(Begin::Replay(got)) => assert!(got == outcome, "round {round}: another outcome"),
            other => panic!("round {round}: a completed record must replay, got {other:?}"),
        }
        match store.begin(&id, &fp(2), LONG).await {
            Ok(Begin::Mismatch) => {}
            other => panic!("round {round}: another fingerprint must be a mismatch, got {other:?}"),
        }
    }
    assert_eq!(
        store.remove(&id, false).await.expect("remove"),
        Removal::Removed
    );
    let again = acquire(&*store, &id, 2, LONG).await;
    assert!(again.token > first.token, "tokens keep growing");
}
