//! `Claim`: the right to run an operation, held while it runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::key::RecordId;
use crate::store::{FencingToken, Lease};

/// The claim an operation runs under, handed to the operation.
///
/// Pass [`fencing_token`](Self::fencing_token) to downstream systems so that
/// they can refuse a holder whose claim was taken over. A store that supports it
/// can complete the record inside the operation's own database transaction with
/// this claim (see `idem-postgres`); the store then marks the claim
/// ([`mark_completed_externally`](Self::mark_completed_externally)) and the
/// engine skips its own completion.
#[derive(Clone, Debug)]
pub struct Claim {
    id: RecordId,
    lease: Lease,
    ttl: Duration,
    flags: Arc<ClaimFlags>,
}

/// What the engine and the operation learn about a claim while it is held,
/// shared between the [`Claim`] and the engine's lease work.
#[derive(Debug, Default)]
pub(crate) struct ClaimFlags {
    /// A renewal found the claim lost.
    pub(crate) lost: AtomicBool,
    /// The record was completed in the operation's own transaction.
    pub(crate) completed_externally: AtomicBool,
}

impl Claim {
    pub(crate) fn new(id: RecordId, lease: Lease, ttl: Duration, flags: Arc<ClaimFlags>) -> Self {
        Self {
            id,
            lease,
            ttl,
            flags,
        }
    }

    /// The record's address.
    pub fn record_id(&self) -> &RecordId {
        &self.id
    }

    /// The lease as granted.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing token of this claim.
    pub fn fencing_token(&self) -> FencingToken {
        self.lease.token
    }

    /// How long the record is kept once completed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether a renewal found the claim lost (lease ran out, taken over). An
    /// operation may check this before an irreversible step.
    pub fn is_lost(&self) -> bool {
        self.flags.lost.load(Ordering::SeqCst)
    }

    /// Tells the engine that the record was completed outside it, inside the
    /// operation's own database transaction, so that it does not complete it
    /// again when the operation returns a result to record. Store adapters
    /// call this once the transaction that completed the record committed
    /// (see `idem-postgres`).
    pub fn mark_completed_externally(&self) {
        self.flags
            .completed_externally
            .store(true, Ordering::SeqCst);
    }

    /// Whether [`mark_completed_externally`](Self::mark_completed_externally) was called.
    pub fn is_completed_externally(&self) -> bool {
        self.flags.completed_externally.load(Ordering::SeqCst)
    }
}
