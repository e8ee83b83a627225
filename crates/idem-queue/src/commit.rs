//! `commit_with_record`: a consumer handler's effect and its result
//! committed together, in one call.

use idem_core::{encode_result, Claim, CommitError, StoreError, StoreTransaction};
use serde::Serialize;

/// Commits `tx` (the handler's writes, in a transaction its store opened:
/// `PgStore::begin_transaction`, `RedisStore::transaction`, ...) with
/// `output` recorded as the handler's result, only while `claim` holds,
/// and hands `output` back for the handler to return. What
/// [`Claim::commit`] and [`encode_result`] do together, for a queue
/// consumer as `commit_response` is for HTTP and `commit_with_record` for
/// gRPC.
///
/// - Committed: the effect and the record landed together; the delivery is
///   acknowledged, and a redelivery is answered from the record.
/// - `Err`: nothing was recorded by the handler's error itself; the engine
///   keeps or releases the claim as the [`CommitError`] says. The claim
///   was lost: rolled back, nothing happened, the other attempt's record
///   answers. Whether it committed is unknown: the claim is kept to its
///   lease, then a redelivery replays it or runs it again. Rolled back or
///   in conflict: released, and a redelivery runs it again.
///
/// An `output` that cannot be encoded rolls `tx` back (nothing happens)
/// and is answered as [`CommitError::RolledBack`].
///
/// # Errors
///
/// The [`CommitError`], as the handler's own error `E`.
pub async fn commit_with_record<T, E, Tx>(claim: &Claim, tx: Tx, output: T) -> Result<T, E>
where
    T: Serialize,
    E: Serialize + From<CommitError>,
    Tx: StoreTransaction,
{
    let outcome = match encode_result::<&T, E>(&Ok(&output)) {
        Ok(outcome) => outcome,
        Err(e) => {
            claim.roll_back(tx).await;
            return Err(E::from(CommitError::RolledBack(StoreError::corrupt(
                format!("the handler's result cannot be recorded: {e}"),
            ))));
        }
    };
    claim.commit(tx, &outcome).await.map_err(E::from)?;
    Ok(output)
}
