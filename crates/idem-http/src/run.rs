//! `Run`: what a covered handler can reach while it runs: its route's
//! settings, and the place to hand over its open transaction.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use idem_core::{Claim, CommitError, Outcome, StoreTransaction};
use tokio::task::futures::TaskLocalFuture;

#[cfg(doc)]
use crate::record_policy::RecordPolicy;
use crate::settings::Settings;

tokio::task_local! {
    /// The covered handler this task runs.
    static RUN: Arc<Run>;
}

type Settling = Pin<Box<dyn Future<Output = Result<(), CommitError>> + Send>>;

/// An open transaction a handler handed over ([`hand_over`]), without its
/// type.
pub(crate) trait Pending: Send {
    /// Records `outcome` as `claim`'s in the transaction and commits, while
    /// the claim holds ([`Claim::commit`], which tells the engine).
    fn record_and_commit(self: Box<Self>, claim: Claim, outcome: Outcome) -> Settling;
    /// Rolls the transaction back: nothing of the handler is kept.
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

/// The run of one covered handler, shared by the pipeline and the handler's
/// task.
pub(crate) struct Run {
    settings: Settings,
    pending: Mutex<Option<Box<dyn Pending>>>,
}

impl Run {
    pub(crate) fn new(settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            pending: Mutex::new(None),
        })
    }

    /// Runs the handler's future in this run.
    pub(crate) fn scope<F: Future>(self: &Arc<Self>, handler: F) -> TaskLocalFuture<Arc<Run>, F> {
        // Not an `async fn`: one would hold `handler` twice (its argument
        // and the scope built from it), and a handler's future is large.
        RUN.scope(Arc::clone(self), handler)
    }

    /// The transaction the handler handed over, if it did.
    pub(crate) fn take_pending(&self) -> Option<Box<dyn Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// The settings of the route whose covered handler this task runs (the
/// defaults outside one): the record policy and body limits that an
/// adapter's `commit_response` applies. Under `idem_tonic`'s layer, the
/// layer's body limits, and `record` is [`RecordPolicy::ByGrpcStatus`]: a
/// gRPC answer is recorded by its final status, under the layer's
/// `RecordCodes`.
pub fn current_settings() -> Settings {
    RUN.try_with(|run| run.settings).unwrap_or_default()
}

/// Hands the covered handler's open transaction to the pipeline, which
/// records the handler's answer in it and commits when the handler has
/// answered: the handler's writes and its recorded answer commit together,
/// or neither does. An earlier transaction handed over in the same run is
/// rolled back (only one records the call).
///
/// # Errors
///
/// The transaction, back, outside a covered handler: the caller commits it
/// itself.
pub async fn hand_over<T: StoreTransaction + 'static>(tx: T) -> Result<(), T> {
    let Ok(run) = RUN.try_with(Arc::clone) else {
        return Err(tx);
    };
    let earlier = run
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .replace(Box::new(tx));
    if let Some(earlier) = earlier {
        tracing::warn!(target: "idem", "a second transaction was handed over in one call; the earlier one is rolled back");
        earlier.roll_back().await;
    }
    Ok(())
}
