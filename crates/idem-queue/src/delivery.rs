//! `Delivery`: what an adapter hands the pipeline, and how it tells its
//! broker the verdict.

use std::future::Future;

use crate::message::Message;
use crate::verdict::Verdict;

/// Why the broker could not be told a verdict. The message then stays
/// unacknowledged, and the broker delivers it again (to a consumer that
/// finds its record, so nothing runs twice).
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct BrokerError {
    what: String,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl BrokerError {
    /// `what` failed because of `source`.
    pub fn new(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// One delivery from a broker.
pub trait Delivery: Send + Sync {
    /// The message as the pipeline reads it.
    fn message(&self) -> &Message;

    /// Tells the broker the message is still being worked on, where it can
    /// be told (JetStream's in-progress ack; a Redis Stream entry's idle
    /// time reset), so that it is not delivered to another consumer while
    /// the handler runs. Called every [`Consumer::progress_every`](crate::Consumer::progress_every).
    fn in_progress(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The longest lease this delivery's claim may take, if the delivery is
    /// bounded in time: an AWS Lambda invocation's time left, so that a
    /// claim held by an invocation that times out lapses when the platform
    /// stops it and its retry takes over at once (AWS Lambda Powertools
    /// does the same). `None` (the default): the engine's lease.
    fn lease_within(&self) -> Option<std::time::Duration> {
        None
    }

    /// Tells the broker `verdict`'s action: ack, redeliver later, or
    /// dead-letter (published where dead letters go before the ack).
    fn settle(self, verdict: &Verdict) -> impl Future<Output = Result<(), BrokerError>> + Send;
}
