//! Settling a claim in the background: recording a result, or releasing a
//! claim under which nothing ran, when the caller could not do it in time
//! (the store was down, or the caller went away).

use std::time::Duration;

use tokio::time::Instant;

use crate::decision::Decision;
use crate::grant::Grant;
use crate::key::Scope;
use crate::store::Outcome;

/// What is left to do with a claim.
pub(crate) enum Settle {
    /// The operation ran: record what every retry gets.
    Complete(Outcome),
    /// Nothing ran under the claim (or the operation said so): give it up.
    Release,
}

impl Settle {
    fn what(&self) -> &'static str {
        match self {
            Settle::Complete(_) => "complete",
            Settle::Release => "release",
        }
    }
}

/// The longest pause between two background attempts.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// The first pause after a failed attempt.
pub(crate) const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// Keeps trying to settle the claim `grant` in a task of its own, until it
/// is settled, the lease is found lost, or the lease's length has passed (by
/// then the store answers "lost" anyway, once it answers at all). The first
/// attempt comes after `first_pause`; `scope` is for the log.
pub(crate) fn settle_later(grant: Grant, settle: Settle, scope: Scope, first_pause: Duration) {
    let id = grant.id;
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::error!(target: "idem", scope = %scope, record = %id, action = settle.what(), decision = Decision::NotSettled.as_str(), "no tokio runtime to settle the claim in the background; it ends with its lease");
        return;
    };
    handle.spawn(async move {
        let give_up = Instant::now() + grant.lease.duration;
        let mut pause = first_pause;
        loop {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let done = match &settle {
                Settle::Complete(outcome) => {
                    grant.store.complete(&id, &grant.lease, outcome, grant.ttl).await
                }
                Settle::Release => grant.release().await,
            };
            match done {
                Ok(()) => {
                    let decision = match settle {
                        Settle::Complete(_) => Decision::CompletedLate,
                        Settle::Release => Decision::ReleasedLate,
                    };
                    tracing::info!(target: "idem", scope = %scope, record = %id, decision = decision.as_str(), "the claim was settled in the background");
                    return;
                }
                Err(e) if e.is_transient() && Instant::now() < give_up => {
                    pause = (pause * 2).clamp(FIRST_PAUSE, MAX_PAUSE);
                }
                Err(e) => {
                    match settle {
                        Settle::Complete(_) => tracing::error!(target: "idem", scope = %scope, record = %id, error = %e, decision = Decision::NotRecorded.as_str(), "the operation ran but its result could not be recorded before its lease ended; a retry after that runs it again"),
                        Settle::Release => tracing::warn!(target: "idem", scope = %scope, record = %id, error = %e, decision = Decision::NotReleased.as_str(), "the claim could not be released; it ends with its lease"),
                    }
                    return;
                }
            }
        }
    });
}
