//! `Permitted`: a delivery that holds one of its consumer's handler permits
//! until the broker is told its verdict, so that a batch's slow message
//! holds back only its own permit.

use std::future::Future;

use tokio::sync::OwnedSemaphorePermit;

use crate::delivery::{BrokerError, Delivery};
use crate::message::Message;
use crate::verdict::Verdict;

/// `delivery` with `permit`, given back once it is settled (or dropped).
pub(crate) struct Permitted<D> {
    delivery: D,
    permit: OwnedSemaphorePermit,
}

impl<D> Permitted<D> {
    pub(crate) fn new(delivery: D, permit: OwnedSemaphorePermit) -> Self {
        Self { delivery, permit }
    }
}

impl<D: Delivery> Delivery for Permitted<D> {
    fn message(&self) -> &Message {
        self.delivery.message()
    }

    fn in_progress(&self) -> impl Future<Output = ()> + Send {
        self.delivery.in_progress()
    }

    fn settle(self, verdict: &Verdict) -> impl Future<Output = Result<(), BrokerError>> + Send {
        // The permit goes back when this future ends.
        let Self { delivery, permit } = self;
        let settled = delivery.settle(verdict);
        async move {
            let told = settled.await;
            drop(permit);
            told
        }
    }
}
