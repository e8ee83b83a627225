//! `RabbitOptions`: how a RabbitMQ queue is consumed, and the heartbeat
//! that bounds how long a frozen consumer keeps its deliveries.

use std::time::Duration;

use lapin::uri::AMQPUri;
use lapin::ConnectionProperties;

use crate::delivery::BrokerError;
use crate::running::Running;

/// How a queue is consumed: `RabbitOptions::default()` and its builder
/// methods.
#[derive(Clone)]
pub struct RabbitOptions {
    /// Unacknowledged deliveries at once (`basic.qos`), and so handlers at once.
    pub prefetch: u16,
    /// Where dead letters go (`None`: `<queue>.dead`, declared durable).
    pub dead_letter_queue: Option<String>,
    /// Declare the queue as a durable quorum queue on each connection
    /// ([`declare_quorum_queue`](crate::rabbitmq::declare_quorum_queue)); if
    /// not, it must exist.
    pub declare_quorum_queue: bool,
    /// How the connection is made (lapin's defaults).
    pub connection: ConnectionProperties,
    /// The AMQP heartbeat asked for when the URL sets none (`?heartbeat=`
    /// wins). `None` (the default): a third of the consumer's lease, in
    /// whole seconds, at least 1 ([`default_heartbeat`]). RabbitMQ drops a
    /// connection silent for two to three heartbeats, so a consumer that
    /// stops answering (frozen, or its host gone) loses its unacknowledged
    /// deliveries to another consumer about when its claims expire; the
    /// broker's own default is 60 s, three minutes of a frozen consumer.
    pub heartbeat: Option<Duration>,
    /// Until when, draining how long, reconnecting how.
    pub running: Running,
}

impl Default for RabbitOptions {
    /// 16 at once, dead letters to `<queue>.dead`, the queue declared as a
    /// quorum queue, until the process ends.
    fn default() -> Self {
        Self {
            prefetch: 16,
            dead_letter_queue: None,
            declare_quorum_queue: true,
            connection: ConnectionProperties::default(),
            heartbeat: None,
            running: Running::default(),
        }
    }
}

impl std::fmt::Debug for RabbitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitOptions")
            .field("prefetch", &self.prefetch)
            .field("dead_letter_queue", &self.dead_letter_queue)
            .field("declare_quorum_queue", &self.declare_quorum_queue)
            .field("heartbeat", &self.heartbeat)
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl RabbitOptions {
    /// Deliveries (and handlers) at once.
    #[must_use]
    pub fn prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Dead letters to `queue` instead of `<queue>.dead`.
    #[must_use]
    pub fn dead_letter_queue(mut self, queue: &str) -> Self {
        self.dead_letter_queue = Some(queue.to_owned());
        self
    }

    /// Whether the queue is declared as a quorum queue (default) or must
    /// exist.
    #[must_use]
    pub fn declare_quorum_queue(mut self, declare: bool) -> Self {
        self.declare_quorum_queue = declare;
        self
    }

    /// How the connection is made.
    #[must_use]
    pub fn connection(mut self, properties: ConnectionProperties) -> Self {
        self.connection = properties;
        self
    }

    /// The heartbeat asked for when the URL sets none (whole seconds,
    /// at least 1), in place of a third of the consumer's lease.
    #[must_use]
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = Some(heartbeat);
        self
    }

    /// Until when, draining how long, reconnecting how.
    #[must_use]
    pub fn running(mut self, running: Running) -> Self {
        self.running = running;
        self
    }
}

/// The AMQP heartbeat a consumer with claims of `lease` asks for by
/// default: a third of the lease, in whole seconds, at least 1 (3 s for
/// the default 10 s lease). RabbitMQ drops a connection silent for two to
/// three heartbeats: a frozen consumer's deliveries go to another one
/// about when its claims expire. (RabbitMQ's documentation advises 5 to
/// 20 s against false alarms; one here only requeues what the consumer
/// held, and its claims keep it from running twice.)
pub fn default_heartbeat(lease: Duration) -> Duration {
    Duration::from_secs((lease.as_secs() / 3).max(1))
}

/// `url` with `heartbeat` asked for unless it asks for one itself.
pub(crate) fn with_heartbeat(url: &str, heartbeat: Duration) -> Result<AMQPUri, BrokerError> {
    let mut uri: AMQPUri = url.parse().map_err(|e: String| {
        BrokerError::new("rabbitmq url", format!("{url:?} is not an AMQP URL: {e}"))
    })?;
    if uri.query.heartbeat.is_none() {
        let secs = u16::try_from(heartbeat.as_secs().max(1)).unwrap_or(u16::MAX);
        uri.query.heartbeat = Some(secs);
    }
    Ok(uri)
}
