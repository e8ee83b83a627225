//! Calls and claims made directly on a store, as a holder outside the
//! engine would.

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Lease, Store};

/// A call of operation `op` under `key` in `scope`, fingerprinting the key.
pub fn call(scope: &str, key: &str) -> idem_core::Call {
    idem_core::Call::new(
        scope,
        idem_core::IdempotencyKey::parse(key).expect("a valid key"),
        idem_core::Fingerprint::of("op", &key).expect("fingerprint"),
    )
}

/// Claims `call`'s record directly on `store`, as a holder outside the engine
/// would; panics if the record is not free.
pub async fn claim(store: &dyn Store, call: &idem_core::Call, lease: Duration) -> Lease {
    match store
        .begin(call.record_id(), call.fingerprint(), lease)
        .await
    {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!(
            "the record of {:?} must be free to claim, got {other:?}",
            call.key()
        ),
    }
}

/// Polls `call`'s completed record until its lifetime is over by the
/// store's clock: a retry is then refused as expired.
pub async fn wait_until_expired(store: &dyn Store, call: &idem_core::Call) {
    retry_until(
        store,
        call,
        "expire",
        |b| matches!(b, Begin::Expired),
        |b| matches!(b, Begin::Replay(_)),
    )
    .await;
}

/// Polls `call`'s completed record until its trace is over too by the
/// store's clock: the retry that finds it so claims the record (kept, with
/// a lease of 30 s).
pub async fn wait_until_forgotten(store: &dyn Store, call: &idem_core::Call) {
    retry_until(
        store,
        call,
        "be forgotten",
        |b| matches!(b, Begin::Acquired(_)),
        |b| matches!(b, Begin::Replay(_) | Begin::Expired),
    )
    .await;
}

/// Retries `call` on `store` until it is answered as `done` says, for ten
/// seconds, while it is answered as `before` says.
async fn retry_until(
    store: &dyn Store,
    call: &idem_core::Call,
    what: &str,
    done: impl Fn(&Begin) -> bool,
    before: impl Fn(&Begin) -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match store
            .begin(
                call.record_id(),
                call.fingerprint(),
                Duration::from_secs(30),
            )
            .await
        {
            Ok(b) if done(&b) => return,
            Ok(b) if before(&b) && std::time::Instant::now() < deadline => {}
            other => panic!("waiting for {:?} to {what}, got {other:?}", call.key()),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `store` until it holds a record (the first request's claim, in a
/// story that starts with one), for ten seconds; `what` names that request.
pub async fn until_claimed(store: &idem_core::MemoryStore, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls `store` until the record `id` has been claimed and its claim's
/// lease has run out unrenewed (it is no longer in flight: a retry takes
/// it over), for ten seconds; `what` names the holder. A story whose
/// holder freezes past its lease waits here instead of sleeping a margin.
pub async fn until_lease_lapsed(store: &dyn Store, id: &idem_core::RecordId, what: &str) {
    until_lapsed(store, id, what, false).await;
}

/// [`until_lease_lapsed`], for a caller that knows the record was claimed
/// (it holds the lease the store granted): a slow store whose first answer
/// comes after a short lease has run out cannot be taken for one that was
/// never claimed.
pub async fn until_claim_lapsed(store: &dyn Store, id: &idem_core::RecordId, what: &str) {
    until_lapsed(store, id, what, true).await;
}

async fn until_lapsed(store: &dyn Store, id: &idem_core::RecordId, what: &str, mut claimed: bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let in_flight = matches!(
            store.inspect(id).await,
            Ok(Some(idem_core::RecordInfo {
                state: idem_core::RecordInfoState::InFlight { lease_left },
                ..
            })) if !lease_left.is_zero()
        );
        if claimed && !in_flight {
            return;
        }
        claimed |= in_flight;
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {}",
            if claimed {
                "its lease never ran out"
            } else {
                "never claimed"
            }
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
