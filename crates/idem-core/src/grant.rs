//! `Grant`: a claim the store granted, with everything its holder needs to
//! run under it, renew it, record its outcome or release it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::in_flight::Entered;
use crate::key::RecordId;
use crate::store::{Lease, Outcome, Store, StoreError};

/// A claim the store granted for one call: the store that granted it, the
/// record's address, the lease, the lease's length as the policy asked for
/// it, and how long the record is kept once completed. It travels whole from
/// the store's answer to the claim's end: through [`Claimed`](crate::adapter::Claimed)
/// when it is run somewhere else, into the engine's holder while the
/// operation runs, into a background task when the claim is settled late.
pub(crate) struct Grant {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) id: RecordId,
    pub(crate) lease: Lease,
    /// The lease's length the policy asked for; renewals come every third.
    pub(crate) lease_len: Duration,
    /// How long the record is kept once completed.
    pub(crate) ttl: Duration,
    /// Counted as the engine's work in flight while this grant lives; a
    /// clone is not counted ([`hand_over`](Self::hand_over) moves it).
    pub(crate) entered: Option<Entered>,
}

impl Clone for Grant {
    /// The same claim, not counted as work in flight (its holder is).
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            id: self.id,
            lease: self.lease,
            lease_len: self.lease_len,
            ttl: self.ttl,
            entered: None,
        }
    }
}

impl Grant {
    /// The same claim, counted as `entered` work in flight.
    pub(crate) fn counted(mut self, entered: Entered) -> Self {
        self.entered = Some(entered);
        self
    }

    /// The same claim for whoever settles it next (a background task), the
    /// count of work in flight moved with it.
    pub(crate) fn hand_over(&mut self) -> Self {
        let mut next = self.clone();
        next.entered = self.entered.take();
        next
    }

    /// Records `outcome`. Transient store failures are retried a few times
    /// within the lease: losing a result that was produced costs a re-run
    /// later.
    pub(crate) async fn complete(&self, outcome: &Outcome) -> Result<(), StoreError> {
        let mut pause = Duration::from_millis(20);
        let mut attempt = 0;
        loop {
            let completed = self
                .store
                .complete(&self.id, &self.lease, outcome, self.ttl);
            match completed.await {
                Err(e) if e.is_transient() && attempt < 3 && pause < self.lease.duration => {
                    attempt += 1;
                    tokio::time::sleep(pause).await;
                    pause *= 4;
                }
                other => return other,
            }
        }
    }

    /// Gives the claim up: nothing took effect under it.
    pub(crate) async fn release(&self) -> Result<(), StoreError> {
        self.store.release(&self.id, &self.lease).await
    }
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("record", &self.id)
            .field("token", &self.lease.token)
            .finish_non_exhaustive()
    }
}
