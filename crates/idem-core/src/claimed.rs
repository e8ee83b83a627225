//! `Begun` and `Claimed`: the first step of a call on its own, the claim
//! taken (or the answer without one), for callers that run the operation
//! somewhere else than where they took the claim.

use std::fmt;
use std::time::Duration;

use crate::decision::Decision;
use crate::grant::Grant;
use crate::key::Scope;
use crate::settle::{settle_later, Settle};
use crate::store::Outcome;

/// What [`Engine::begin`](crate::Engine::begin) found: a retry's recorded
/// outcome, or the claim for this call.
#[derive(Debug)]
pub enum Begun {
    /// The call had run: its recorded outcome, for the caller to decode.
    Replayed(Outcome),
    /// The claim is this call's: run the operation under it with
    /// [`Engine::execute_claimed`](crate::Engine::execute_claimed).
    Claimed(Claimed),
}

/// A claim taken for one call and not yet run under.
///
/// Hand it to [`Engine::execute_claimed`](crate::Engine::execute_claimed)
/// with the same call. Dropped instead, it is released in the background (on
/// the current tokio runtime): nothing ran under it, so a retry runs the
/// call. Outside a runtime it ends with its lease.
pub struct Claimed {
    grant: Grant,
    /// For the log, if it is dropped unused.
    scope: Scope,
    /// Whether dropping it releases the claim (not once it is run under).
    armed: bool,
}

impl Claimed {
    pub(crate) fn new(grant: Grant, scope: Scope) -> Self {
        Self {
            grant,
            scope,
            armed: true,
        }
    }

    /// The fencing token of the claim.
    pub fn fencing_token(&self) -> crate::FencingToken {
        self.grant.lease.token
    }

    /// The record the claim is on.
    pub(crate) fn record_id(&self) -> &crate::RecordId {
        &self.grant.id
    }

    /// Hands the claim over to its holder: dropping it no longer releases.
    pub(crate) fn disarm(mut self) -> Grant {
        self.armed = false;
        self.grant.hand_over()
    }
}

impl fmt::Debug for Claimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claimed")
            .field("record", &self.grant.id)
            .field("token", &self.grant.lease.token)
            .finish_non_exhaustive()
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::debug!(target: "idem", scope = %self.scope, record = %self.grant.id, token = self.grant.lease.token.0, decision = Decision::ReleasingUnusedClaim.as_str(), "a claim was dropped before anything ran under it; it is released");
        settle_later(
            self.grant.hand_over(),
            Settle::Release,
            std::mem::take(&mut self.scope),
            Duration::ZERO,
        );
    }
}
