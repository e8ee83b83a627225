//! `SqsOptions`: how an SQS queue is consumed (`idem_queue::sqs`).

use std::time::Duration;

use crate::running::Running;

/// How a queue is consumed: `SqsOptions::default()` and its builder
/// methods.
#[derive(Clone, Debug)]
pub struct SqsOptions {
    /// Messages received at once (1 to 10), and handlers at once.
    pub batch: i32,
    /// How long a receive waits for messages (long polling, at most 20 s).
    pub wait: Duration,
    /// How long a received message stays hidden from other consumers, and
    /// what each heartbeat sets it to again. `None` (the default): the
    /// consumer's lease, so that a frozen consumer's message comes back
    /// about when its claim expires.
    pub visibility: Option<Duration>,
    /// Where dead letters go (`None`: left to the queue's redrive policy
    /// if it has one, else sent to the queue `<queue>-dead`, made at
    /// start).
    pub dead_letter_queue_url: Option<String>,
    /// Until when, draining how long, reconnecting how.
    pub running: Running,
}

impl Default for SqsOptions {
    /// Ten messages at once, receives waiting up to 5 s, the lease as the
    /// visibility timeout, dead letters to the queue's redrive policy (or
    /// `<queue>-dead` where it has none), until the process ends.
    fn default() -> Self {
        Self {
            batch: 10,
            wait: Duration::from_secs(5),
            visibility: None,
            dead_letter_queue_url: None,
            running: Running::default(),
        }
    }
}

impl SqsOptions {
    /// Messages received (and handlers) at once, 1 to 10.
    #[must_use]
    pub fn batch(mut self, batch: i32) -> Self {
        self.batch = batch.clamp(1, 10);
        self
    }

    /// How long a receive waits for messages (at most 20 s).
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait.min(Duration::from_secs(20));
        self
    }

    /// The visibility timeout, in place of the consumer's lease.
    #[must_use]
    pub fn visibility(mut self, visibility: Duration) -> Self {
        self.visibility = Some(visibility);
        self
    }

    /// Dead letters sent to the queue at `url`, with their reason, in place
    /// of the queue's redrive policy or `<queue>-dead`.
    #[must_use]
    pub fn dead_letter_queue_url(mut self, url: &str) -> Self {
        self.dead_letter_queue_url = Some(url.to_owned());
        self
    }

    /// Until when, draining how long, reconnecting how.
    #[must_use]
    pub fn running(mut self, running: Running) -> Self {
        self.running = running;
        self
    }
}
