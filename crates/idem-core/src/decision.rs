//! `Decision`: every word idem uses for what it decided about a call, in
//! its logs (field `decision`) and, for how a call ended, in its metrics
//! (`idem.decisions`, attribute `idem.outcome`): one list, so that the two
//! can never disagree.

use std::fmt;

/// What idem decided about a call. The first eleven are how a call ends, and
/// each call is counted once under one of them ([`is_outcome`](Self::is_outcome));
/// the others are steps on the way, logged only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Decision {
    /// The operation ran and its result was recorded.
    Executed,
    /// A recorded result was answered again.
    Replayed,
    /// Another caller holds the claim; this one was told to come back.
    InFlight,
    /// The key was used for a different request.
    Mismatch,
    /// A late retry: the key's record has expired, its trace refused to run
    /// it again.
    Expired,
    /// The claim was given up (a transient failure, a 5xx): a retry runs again.
    Released,
    /// The operation finished after its claim was lost; nothing was recorded.
    LeaseLost,
    /// The store failed; the operation did not run.
    StoreError,
    /// The operation ran; its result is being recorded in the background.
    CompletedLate,
    /// The operation ran; nothing is recorded, the claim waits out its lease.
    Kept,
    /// The operation was dropped or panicked mid-way: its outcome is
    /// unknown, so its claim is kept until the lease ends.
    Abandoned,
    /// The process ran as much claimed work as it may: refused before the
    /// store was asked; nothing ran.
    Overloaded,
    /// Step: the claim was granted.
    Acquired,
    /// Step: a duplicate waits for the holder (`OnInFlight::Wait`).
    Waiting,
    /// Step: the caller went away; the operation goes on without it.
    Detached,
    /// Step: the lease was renewed.
    Renewed,
    /// Step: a renewal failed.
    RenewFailed,
    /// Step: a claim nobody used (its caller went away before it ran) is released.
    ReleasingUnusedClaim,
    /// Step: a release is retried in the background.
    ReleasingInBackground,
    /// Step: a release failed.
    ReleaseFailed,
    /// Step: a claim was released in the background.
    ReleasedLate,
    /// Step: the claim could not be settled in time.
    NotSettled,
    /// Step: the claim could not be released; it ends with its lease.
    NotReleased,
    /// Step: the result could not be recorded before the lease ended.
    NotRecorded,
    /// Step: the operation's transaction was rolled back.
    RolledBack,
    /// Step: whether the operation's transaction committed is unknown.
    CommitUncertain,
    /// Step: the memory store evicted completed records at its bound.
    Evicted,
}

impl Decision {
    /// Every decision, outcomes first.
    pub const ALL: [Decision; 27] = [
        Self::Executed,
        Self::Replayed,
        Self::InFlight,
        Self::Mismatch,
        Self::Expired,
        Self::Released,
        Self::LeaseLost,
        Self::StoreError,
        Self::CompletedLate,
        Self::Kept,
        Self::Abandoned,
        Self::Overloaded,
        Self::Acquired,
        Self::Waiting,
        Self::Detached,
        Self::Renewed,
        Self::RenewFailed,
        Self::ReleasingUnusedClaim,
        Self::ReleasingInBackground,
        Self::ReleaseFailed,
        Self::ReleasedLate,
        Self::NotSettled,
        Self::NotReleased,
        Self::NotRecorded,
        Self::RolledBack,
        Self::CommitUncertain,
        Self::Evicted,
    ];

    /// The word in logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Executed => "executed",
            Self::Replayed => "replayed",
            Self::InFlight => "in_flight",
            Self::Mismatch => "mismatch",
            Self::Expired => "expired",
            Self::Released => "released",
            Self::LeaseLost => "lease_lost",
            Self::StoreError => "store_error",
            Self::CompletedLate => "completed_late",
            Self::Kept => "kept",
            Self::Abandoned => "abandoned",
            Self::Overloaded => "overloaded",
            Self::Acquired => "acquired",
            Self::Waiting => "waiting",
            Self::Detached => "detached",
            Self::Renewed => "renewed",
            Self::RenewFailed => "renew_failed",
            Self::ReleasingUnusedClaim => "releasing_unused_claim",
            Self::ReleasingInBackground => "releasing_in_background",
            Self::ReleaseFailed => "release_failed",
            Self::ReleasedLate => "released_late",
            Self::NotSettled => "not_settled",
            Self::NotReleased => "not_released",
            Self::NotRecorded => "not_recorded",
            Self::RolledBack => "rolled_back",
            Self::CommitUncertain => "commit_uncertain",
            Self::Evicted => "evicted",
        }
    }

    /// Whether it is how a call ends (counted in `idem.decisions`), rather
    /// than a step on the way (logged only).
    pub const fn is_outcome(self) -> bool {
        matches!(
            self,
            Self::Executed
                | Self::Replayed
                | Self::InFlight
                | Self::Mismatch
                | Self::Expired
                | Self::Released
                | Self::LeaseLost
                | Self::StoreError
                | Self::CompletedLate
                | Self::Kept
                | Self::Abandoned
                | Self::Overloaded
        )
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Decision;

    #[test]
    fn every_decision_has_its_own_word_and_twelve_are_outcomes() {
        let words: std::collections::HashSet<&str> =
            Decision::ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(words.len(), Decision::ALL.len());
        assert_eq!(Decision::ALL.iter().filter(|d| d.is_outcome()).count(), 12);
        assert!(Decision::ALL[..12].iter().all(|d| d.is_outcome()));
    }
}
