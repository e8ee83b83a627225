//! `commit_with_record`: a method's response recorded in the method's own
//! database transaction, committed with its writes or not at all.

use idem_core::{StoreError, StoreErrorKind, StoreTransaction};
use tonic::Status;

/// Hands the method's open transaction to the layer, which records the
/// method's response in it and commits: the method's writes and its
/// recorded response commit together, or neither does. Call it last in a
/// covered method, after its writes, then return the response; retries
/// replay it byte for byte, as any recorded one.
///
/// The layer encodes the response as the client gets it (metadata, message
/// and trailers) and then, in the transaction:
///
/// | the method's answer | the client gets | the transaction | the key |
/// | --- | --- | --- | --- |
/// | a response, or a status the layer records | it | committed with the record | replays it |
/// | a status the layer does not record (`UNAVAILABLE`, ...) | it | rolled back | runs again on retry |
/// | any, but the claim was lost (its lease ended, another call took over) | `ABORTED` `lease-lost` | rolled back | the other call's |
/// | any, but the record cannot be written, or what an optimistic store's transaction read changed (Redis, memory) | `UNAVAILABLE` `store-unavailable` | rolled back | runs again on retry |
/// | any, but the commit fails | `UNAVAILABLE` `commit-uncertain` | unknown | `ABORTED` until the lease ends, then replays if it committed, or runs again |
///
/// Called twice in one call, the earlier transaction is rolled back (one
/// transaction records a call). Outside a covered call (a method the layer
/// does not name, or a call without a key where keys are optional) it
/// commits at once, and its error says what became of the writes: what an
/// optimistic store's transaction read changed (Redis, memory), `ABORTED`,
/// nothing applied (read again and retry, gRPC's code for a concurrency
/// conflict); a transaction the store refused before applying anything,
/// `FAILED_PRECONDITION`; any other failure, `UNAVAILABLE`, the outcome of
/// the commit unknown.
///
/// ```no_run
/// use idem_postgres::PgStore;
/// use tonic::{Response, Status};
///
/// async fn refund(store: &PgStore, note: &str) -> Result<Response<()>, Status> {
///     let mut tx = store
///         .begin_transaction()
///         .await
///         .map_err(|e| Status::unavailable(e.to_string()))?;
///     sqlx::query("INSERT INTO refunds (note) VALUES ($1)")
///         .bind(note)
///         .execute(&mut *tx)
///         .await
///         .map_err(|e| Status::unavailable(e.to_string()))?;
///     idem_tonic::commit_with_record(tx).await?;
///     Ok(Response::new(()))
/// }
/// ```
pub async fn commit_with_record<T: StoreTransaction + 'static>(tx: T) -> Result<(), Status> {
    match idem_http::hand_over(tx).await {
        Ok(()) => Ok(()),
        Err(tx) => tx.commit().await.map_err(|e| uncovered_commit_failed(&e)),
    }
}

/// The status for a commit outside a covered call that failed: whether
/// anything was applied is the error's kind.
fn uncovered_commit_failed(e: &StoreError) -> Status {
    match e.kind() {
        StoreErrorKind::Conflict => Status::aborted(format!(
            "the transaction was not committed and nothing was applied: {e}"
        )),
        StoreErrorKind::Unsupported | StoreErrorKind::LeaseLost => Status::failed_precondition(
            format!("the transaction was refused and nothing was applied: {e}"),
        ),
        _ => Status::unavailable(format!(
            "the transaction may or may not have committed: {e}"
        )),
    }
}
