//! Checks that a store's owned forms (`begin_owned`, `complete_owned`, which
//! the engine calls) answer as `begin` and `complete` do.

use std::sync::Arc;

use super::support::{expect_lease_lost, fp, fresh_id, LONG, TTL};
use crate::store::{Begin, FencingToken, Lease, Outcome, Store};

/// `begin_owned` and `complete_owned` follow the same rules as `begin` and
/// `complete`, mixed freely on one record: one claim, duplicates in flight,
/// mismatches, fencing, a replay byte for byte, and a second completion by
/// the same holder that keeps the first outcome.
pub async fn owned_forms_answer_as_begin_and_complete(store: Arc<dyn Store>) {
    let id = fresh_id("owned");
    let lease = match Arc::clone(&store).begin_owned(id, fp(1), LONG).await {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!("begin_owned on a free record must answer Acquired, got {other:?}"),
    };
    assert_eq!(lease.duration, LONG, "the lease asked for");
    let got = store.begin(&id, &fp(1), LONG).await;
    assert!(
        matches!(got, Ok(Begin::InFlight { .. })),
        "begin after begin_owned's claim must answer InFlight, got {got:?}"
    );
    let got = Arc::clone(&store).begin_owned(id, fp(1), LONG).await;
    assert!(
        matches!(got, Ok(Begin::InFlight { .. })),
        "begin_owned on a claim in flight must answer InFlight, got {got:?}"
    );
    let got = Arc::clone(&store).begin_owned(id, fp(2), LONG).await;
    assert!(
        matches!(got, Ok(Begin::Mismatch)),
        "begin_owned with another fingerprint in flight must answer Mismatch, got {got:?}"
    );

    let forged = Lease {
        token: FencingToken(lease.token.0 + 1),
        duration: LONG,
    };
    let junk = Outcome::new(b"forged".to_vec());
    expect_lease_lost(
        "complete_owned with a wrong token",
        Arc::clone(&store).complete_owned(id, forged, junk, TTL),
    )
    .await;

    let bytes: Vec<u8> = (0..=255u8).collect();
    let outcome = Outcome::new(bytes);
    Arc::clone(&store)
        .complete_owned(id, lease, outcome.clone(), TTL)
        .await
        .expect("complete_owned by the holder must succeed");
    Arc::clone(&store)
        .complete_owned(id, lease, Outcome::new(b"second".to_vec()), TTL)
        .await
        .expect("completing again with the same token must succeed and change nothing");
    for round in 0..2 {
        let owned = Arc::clone(&store).begin_owned(id, fp(1), LONG).await;
        let borrowed = store.begin(&id, &fp(1), LONG).await;
        for (form, got) in [("begin_owned", owned), ("begin", borrowed)] {
            match got {
                Ok(Begin::Replay(got)) => assert!(
                    got == outcome,
                    "{form} must replay the first outcome byte for byte (round {round}, {} \
                     bytes returned)",
                    got.len()
                ),
                other => panic!("{form} after complete_owned must replay, got {other:?}"),
            }
        }
    }
    let got = Arc::clone(&store).begin_owned(id, fp(2), LONG).await;
    assert!(
        matches!(got, Ok(Begin::Mismatch)),
        "begin_owned with another fingerprint after completion must answer Mismatch, got {got:?}"
    );
}
