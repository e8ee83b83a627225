//! `commit_with_record`: a method's response recorded in the method's own
//! database transaction, committed with its writes or not at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use idem_core::{Claim, CommitError, Outcome, StoreTransaction};
use tonic::Status;

tokio::task_local! {
    /// The covered call this task runs: where its method leaves an open
    /// transaction for the layer to record in and commit.
    static RUN: Arc<RunSlot>;
}

type Settling = Pin<Box<dyn Future<Output = Result<(), CommitError>> + Send>>;

/// An open transaction the method handed over, without its type.
pub(crate) trait Pending: Send {
    /// Records `outcome` as `claim`'s in the transaction and commits, while
    /// the claim holds ([`Claim::commit`], which tells the engine).
    fn record_and_commit(self: Box<Self>, claim: Claim, outcome: Outcome) -> Settling;
    /// Rolls the transaction back: nothing of the method is kept.
    fn roll_back(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<T: StoreTransaction + 'static> Pending for T {
    fn record_and_commit(self: Box<Self>, claim: Claim, outcome: Outcome) -> Settling {
        Box::pin(async move { claim.commit(*self, &outcome).await })
    }

    fn roll_back(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            if let Err(e) = self.rollback().await {
                // The server rolls back a transaction whose connection is gone.
                tracing::warn!(target: "idem", error = %e, "rollback failed");
            }
        })
    }
}

/// What the layer shares with [`commit_with_record`] while a method runs.
#[derive(Default)]
pub(crate) struct RunSlot {
    pending: Mutex<Option<Box<dyn Pending>>>,
}

impl RunSlot {
    /// Runs the method's future in this slot.
    pub(crate) async fn run<F: Future>(self: &Arc<Self>, method: F) -> F::Output {
        RUN.scope(Arc::clone(self), method).await
    }

    /// The transaction the method handed over, if it did.
    pub(crate) fn take(&self) -> Option<Box<dyn Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

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
/// Outside a covered call (a method the layer does not name, or a call
/// without a key where keys are optional) it commits at once. Its error is
/// then the commit's, as `UNAVAILABLE`: the outcome of a failed commit is
/// unknown.
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
    match RUN.try_with(Arc::clone) {
        Ok(slot) => {
            let earlier = slot
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replace(Box::new(tx));
            if let Some(earlier) = earlier {
                // Only one transaction records the call: an earlier one handed
                // over is rolled back, as if the method had dropped it.
                tracing::warn!(target: "idem", "commit_with_record called twice in one call; the earlier transaction is rolled back");
                earlier.roll_back().await;
            }
            Ok(())
        }
        Err(_) => tx.commit().await.map_err(|e| {
            Status::unavailable(format!(
                "the transaction may or may not have committed: {e}"
            ))
        }),
    }
}
