//! `Held`: the engine as the holder of a claim, from the store's grant to
//! its settling: running the operation while renewing the lease, recording,
//! keeping or releasing, and what is left to finish when the caller goes
//! away mid-way.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::call::Call;
use crate::claim::{Claim, ClaimShared};
use crate::completion::{Completion, Execution};
use crate::decision::Decision;
use crate::error::Error;
use crate::grant::Grant;
use crate::key::Scope;
use crate::observe;
use crate::policy::MIN_DURATION;
use crate::settle::{settle_later, Settle, FIRST_PAUSE};
use crate::settled::Settled;
use crate::store::{Outcome, StoreError};

/// Renews the claim `grant` every `every` until it is aborted, or finds
/// the claim lost and says so in `shared`; `scope` is for the log.
async fn renew_loop(mut grant: Grant, every: Duration, shared: Arc<ClaimShared>, scope: Scope) {
    let id = grant.id;
    // The caller has already waited `every` when it starts this task.
    loop {
        let (store, lease) = (&grant.store, &grant.lease);
        match store.renew(&id, lease, lease.duration).await {
            Ok(renewed) => {
                grant.lease = renewed;
                tracing::trace!(target: "idem", scope = %scope, record = %id, decision = Decision::Renewed.as_str());
            }
            Err(e) if e.is_lease_lost() => {
                shared.lost.store(true, Ordering::SeqCst);
                tracing::warn!(target: "idem", scope = %scope, record = %id, decision = Decision::LeaseLost.as_str(), "renewal found the claim lost; the operation's result will not be recorded");
                return;
            }
            Err(e) => {
                // Try again well before the lease runs out: the next regular
                // renewal could come too late after a store blip.
                tracing::warn!(target: "idem", scope = %scope, record = %id, error = %e, decision = Decision::RenewFailed.as_str(), "lease renewal failed; trying again");
                tokio::time::sleep((every / 4).max(MIN_DURATION)).await;
                continue;
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Where the held claim is: what dropping it mid-way leaves to finish.
enum Phase {
    Running,
    Completing(Outcome),
    /// Nothing took effect and the claim is being released.
    Releasing,
    Done,
}

/// The claim the engine holds for one call, from the store's grant to its
/// settling: the call, the [`Grant`], the flags it shares with the
/// operation's [`Claim`], the renewal task, and the phase. Dropped or panicking mid-way, it settles what its phase says: it
/// finishes recording an outcome, finishes a release, or keeps a claim whose
/// operation may have taken effect until its lease ends.
pub(crate) struct Held<'a> {
    grant: Grant,
    call: &'a Call,
    shared: Arc<ClaimShared>,
    phase: Phase,
    renewal: Option<JoinHandle<()>>,
}

impl<'a> Held<'a> {
    /// The claim `grant` the store granted for `call`.
    pub(crate) fn new(grant: Grant, call: &'a Call) -> Self {
        observe::claims_held(1.0);
        Self {
            grant,
            call,
            shared: ClaimShared::new(&call.scope, call.key()),
            phase: Phase::Running,
            renewal: None,
        }
    }

    /// The operation's phase: runs `op` under the claim, renewing it from a
    /// third of the lease on; what the operation completed with.
    pub(crate) async fn run<T, F, Fut>(&mut self, op: F) -> Completion<T>
    where
        F: FnOnce(Claim) -> Fut,
        Fut: Future<Output = Completion<T>>,
    {
        let call = self.call;
        let grant = &self.grant;
        let claim = Claim::new(call.id, grant.lease, grant.ttl, Arc::clone(&self.shared));
        let renew_every = grant.lease_len / 3;
        let fut = claim.clone().run_as_current(op(claim));
        tokio::pin!(fut);
        // Many operations end at their first poll (nothing to wait for): no
        // timer for them. Most others end well within a third of the lease;
        // only a slower one pays for a renewal task. The third is counted
        // from before the first poll, which may itself be long (work done
        // without yielding), so that the first renewal is not pushed back.
        let started = tokio::time::Instant::now();
        let first = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
        let completion = if let Poll::Ready(completion) = first {
            completion
        } else if let Ok(completion) =
            tokio::time::timeout_at(started + renew_every, &mut fut).await
        {
            completion
        } else {
            self.renewal = Some(tokio::spawn(renew_loop(
                self.grant.clone(),
                renew_every,
                Arc::clone(&self.shared),
                call.scope.clone(),
            )));
            fut.await
        };
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        completion
    }

    /// The settling phase: records, keeps or releases the claim as the
    /// operation's completion (or the claim itself, settled by
    /// `Claim::commit`) says.
    pub(crate) async fn settle<T>(
        mut self,
        completion: Completion<T>,
    ) -> Result<Execution<T>, Error> {
        let (call, lease) = (self.call, self.grant.lease);
        // The operation settled its claim itself, in its own transaction
        // (`Claim::commit`): that is the outcome, whatever it returned.
        let completion = match self.shared.settled() {
            None => completion,
            Some(Settled::Recorded) => {
                self.phase = Phase::Done;
                executed(call, "in_transaction");
                return Ok(Execution::Executed(completion.into_value()));
            }
            Some(Settled::Kept) => Completion::Keep(completion.into_value()),
            Some(Settled::Released) => Completion::Release(completion.into_value()),
        };
        match completion {
            Completion::Record { value, outcome } => {
                self.phase = Phase::Completing(outcome);
                match self.complete().await {
                    Ok(()) => {
                        self.shared.completed.store(true, Ordering::SeqCst);
                        executed(call, "completed");
                        Ok(Execution::Executed(value))
                    }
                    Err(e) if e.is_lease_lost() => {
                        observe::decision(&call.operation, Decision::LeaseLost);
                        tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, token = lease.token.0, decision = Decision::LeaseLost.as_str(), "the operation finished after its claim was lost; its result is not recorded");
                        Err(Error::LeaseLost)
                    }
                    Err(e) => {
                        // The effect happened: keep trying to record it in the
                        // background while the lease lasts, so that a store
                        // that comes back in time still answers retries with
                        // this result instead of running the operation again.
                        observe::decision(&call.operation, Decision::CompletedLate);
                        tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = Decision::CompletedLate.as_str(), "the operation ran but its result could not be recorded yet; retrying in the background while the lease lasts");
                        if let Some(outcome) = self.take_outcome() {
                            self.settle_later(Settle::Complete(outcome), FIRST_PAUSE);
                        }
                        Ok(Execution::Executed(value))
                    }
                }
            }
            Completion::Keep(value) => {
                self.phase = Phase::Done;
                observe::decision(&call.operation, Decision::Kept);
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, token = lease.token.0, decision = Decision::Kept.as_str(), "the operation has no outcome to record; its claim is kept until the lease ends");
                Ok(Execution::Executed(value))
            }
            Completion::Release(value) => {
                self.phase = Phase::Releasing;
                self.release().await;
                self.phase = Phase::Done;
                Ok(Execution::Executed(value))
            }
        }
    }

    /// Gives up a claim under which nothing took effect; a store that does
    /// not answer now gets more tries in the background.
    async fn release(&mut self) {
        let call = self.call;
        observe::decision(&call.operation, Decision::Released);
        match self.grant.release().await {
            Ok(()) => {
                tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, decision = Decision::Released.as_str());
            }
            Err(e) if e.is_transient() => {
                // Nothing took effect: a retry should run soon,
                // not after the whole lease.
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = Decision::ReleasingInBackground.as_str(), "the claim could not be released yet; retrying in the background while the lease lasts");
                self.settle_later(Settle::Release, FIRST_PAUSE);
            }
            Err(e) => {
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = Decision::ReleaseFailed.as_str(), "the claim could not be released; it ends with its lease");
            }
        }
    }

    /// Records the outcome held in `Completing`. The claim is done after a
    /// success or a lost lease; after a transient failure it keeps the
    /// outcome for [`take_outcome`](Self::take_outcome).
    async fn complete(&mut self) -> Result<(), StoreError> {
        let Phase::Completing(outcome) = &self.phase else {
            return Ok(());
        };
        let result = self.grant.complete(outcome).await;
        if !matches!(&result, Err(e) if e.is_transient()) {
            self.phase = Phase::Done;
        }
        result
    }

    /// The outcome still to be recorded, if any; the claim is done after.
    fn take_outcome(&mut self) -> Option<Outcome> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Completing(outcome) => Some(outcome),
            _ => None,
        }
    }

    /// Hands `settle` to a background task that keeps trying while the
    /// lease lasts.
    fn settle_later(&mut self, settle: Settle, first_pause: Duration) {
        settle_later(
            self.grant.hand_over(),
            settle,
            self.call.scope.clone(),
            first_pause,
        );
    }
}

/// The `executed` decision; `how` tells apart, in the log only, how its
/// outcome was recorded (`completed`, or `in_transaction` by the operation).
fn executed(call: &Call, how: &'static str) {
    tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, decision = Decision::Executed.as_str(), how);
    observe::decision(&call.operation, Decision::Executed);
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        observe::claims_held(-1.0);
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        let call = self.call;
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Done => {}
            // Nothing took effect and the caller went away while the claim
            // was being released: finish the release in the background, so
            // that the key is not left claimed for the lease.
            Phase::Releasing => self.settle_later(Settle::Release, Duration::ZERO),
            // The operation ran and its caller went away while its result
            // was being recorded: keep trying in the background while the
            // lease lasts, as after an outage at completion, so that a
            // retry replays the result instead of running it again.
            Phase::Completing(outcome) => {
                observe::decision(&call.operation, Decision::CompletedLate);
                tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, decision = Decision::CompletedLate.as_str());
                self.settle_later(Settle::Complete(outcome), Duration::ZERO);
            }
            // Dropped or panicked while the operation ran: whatever it did
            // may have taken effect, so the claim is not released. It ends
            // with its lease (no renewal keeps it any longer), and a retry
            // meanwhile is told the operation is in flight.
            Phase::Running => {
                observe::decision(&call.operation, Decision::Abandoned);
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, token = self.grant.lease.token.0, decision = Decision::Abandoned.as_str(), "the operation was dropped or panicked while it ran; its outcome is unknown, so its claim is kept until the lease ends");
            }
        }
    }
}
