//! The engine as the holder of a claim: renewing the lease while the
//! operation runs, completing with retries, and the guard that settles the
//! claim when the caller goes away.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::claim::ClaimShared;
use crate::key::{RecordId, Scope};
use crate::observe;
use crate::policy::MIN_DURATION;
use crate::settle::{settle_later, Settle};
use crate::store::{Lease, Outcome, Store, StoreError};

/// Transient store failures at completion time are retried a few times within
/// the lease: losing a result that was produced costs a re-run later.
pub(crate) async fn complete_with_retry(
    store: &dyn Store,
    id: &RecordId,
    lease: &Lease,
    outcome: &Outcome,
    ttl: Duration,
) -> Result<(), StoreError> {
    let mut pause = Duration::from_millis(20);
    let mut attempt = 0;
    loop {
        match store.complete(id, lease, outcome, ttl).await {
            Err(e) if e.is_transient() && attempt < 3 && pause < lease.duration => {
                attempt += 1;
                tokio::time::sleep(pause).await;
                pause *= 4;
            }
            other => return other,
        }
    }
}

pub(crate) async fn renew_loop(
    store: Arc<dyn Store>,
    id: RecordId,
    mut lease: Lease,
    every: Duration,
    shared: Arc<ClaimShared>,
    scope: Scope,
) {
    // The caller has already waited `every` when it starts this task.
    loop {
        match store.renew(&id, &lease, lease.duration).await {
            Ok(renewed) => {
                lease = renewed;
                tracing::trace!(target: "idem", scope = %scope, record = %id, decision = "renewed");
            }
            Err(e) if e.is_lease_lost() => {
                shared.lost.store(true, Ordering::SeqCst);
                tracing::warn!(target: "idem", scope = %scope, record = %id, decision = "lease_lost", "renewal found the claim lost; the operation's result will not be recorded");
                return;
            }
            Err(e) => {
                // Try again well before the lease runs out: the next regular
                // renewal could come too late after a store blip.
                tracing::warn!(target: "idem", scope = %scope, record = %id, error = %e, decision = "renew_failed", "lease renewal failed; trying again");
                tokio::time::sleep((every / 4).max(MIN_DURATION)).await;
                continue;
            }
        }
        tokio::time::sleep(every).await;
    }
}

pub(crate) enum GuardState {
    Running,
    Completing(Outcome),
    /// Nothing took effect and the claim is being released.
    Releasing,
    Done,
}

/// Finishes recording the outcome if the operation's future is dropped while
/// it is being recorded, and keeps the claim (until its lease ends) if it is
/// dropped or panics while the operation runs.
pub(crate) struct Guard<'a> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) id: RecordId,
    pub(crate) lease: Lease,
    pub(crate) ttl: Duration,
    pub(crate) state: GuardState,
    pub(crate) renewal: Option<JoinHandle<()>>,
    pub(crate) scope: &'a Scope,
    pub(crate) operation: &'a Cow<'static, str>,
}

impl Guard<'_> {
    /// Records the outcome held in `Completing` state. The guard is done after
    /// a success or a lost lease; after a transient failure it keeps the
    /// outcome for [`take_outcome`](Self::take_outcome).
    pub(crate) async fn complete(&mut self) -> Result<(), StoreError> {
        let GuardState::Completing(outcome) = &self.state else {
            return Ok(());
        };
        let result =
            complete_with_retry(&*self.store, &self.id, &self.lease, outcome, self.ttl).await;
        if !matches!(&result, Err(e) if e.is_transient()) {
            self.state = GuardState::Done;
        }
        result
    }

    /// The outcome still to be recorded, if any; the guard is done after.
    pub(crate) fn take_outcome(&mut self) -> Option<Outcome> {
        match std::mem::replace(&mut self.state, GuardState::Done) {
            GuardState::Completing(outcome) => Some(outcome),
            _ => None,
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        observe::claims_held(-1.0);
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        match std::mem::replace(&mut self.state, GuardState::Done) {
            GuardState::Done => {}
            // Nothing took effect and the caller went away while the claim
            // was being released: finish the release in the background, so
            // that the key is not left claimed for the lease.
            GuardState::Releasing => {
                settle_later(
                    Arc::clone(&self.store),
                    self.id,
                    self.lease,
                    Settle::Release,
                    self.scope.clone(),
                    Duration::ZERO,
                );
            }
            // The operation ran and its caller went away while its result
            // was being recorded: keep trying in the background while the
            // lease lasts, as after an outage at completion, so that a
            // retry replays the result instead of running it again.
            GuardState::Completing(outcome) => {
                observe::decision(self.operation, "completed_late");
                tracing::debug!(target: "idem", scope = %self.scope, record = %self.id, decision = "completing_after_cancellation");
                settle_later(
                    Arc::clone(&self.store),
                    self.id,
                    self.lease,
                    Settle::Complete {
                        outcome,
                        ttl: self.ttl,
                    },
                    self.scope.clone(),
                    Duration::ZERO,
                );
            }
            // Dropped or panicked while the operation ran: whatever it did
            // may have taken effect, so the claim is not released. It ends
            // with its lease (no renewal keeps it any longer), and a retry
            // meanwhile is told the operation is in flight.
            GuardState::Running => {
                observe::decision(self.operation, "abandoned");
                tracing::warn!(target: "idem", scope = %self.scope, record = %self.id, token = self.lease.token.0, decision = "outcome_unknown", "the operation was dropped or panicked while it ran; its outcome is unknown, so its claim is kept until the lease ends");
            }
        }
    }
}
