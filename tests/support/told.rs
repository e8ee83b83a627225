//! `Told`: a delivery of the pipeline's own, with no broker behind it,
//! that keeps the verdicts it was told.

use std::sync::{Arc, Mutex, PoisonError};

use idem_queue::{BrokerError, Delivery, Message, Verdict};

/// A delivery of `message` that pushes each verdict it is told on `told`.
pub struct Told {
    /// The message delivered.
    pub message: Message,
    /// The verdicts told, shared by the deliveries of a test.
    pub told: Arc<Mutex<Vec<Verdict>>>,
}

impl Delivery for Told {
    fn message(&self) -> &Message {
        &self.message
    }

    async fn settle(self, verdict: &Verdict) -> Result<(), BrokerError> {
        self.told
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(verdict.clone());
        Ok(())
    }
}
