//! NATS JetStream through `async-nats` (feature `nats`): a pull consumer,
//! each delivery settled by the [`Consumer`]'s verdict.
//!
//! - **Ack**: a double ack (the server confirms it), after the outcome is
//!   stored.
//! - **Redeliver after a delay**: `-NAK` with the delay.
//! - **In progress**: `+WPI` every [`Consumer::progress_every`] while the
//!   handler runs, so the message is not redelivered at `ack_wait`.
//! - **Dead-letter**: published to the dead-letter subject (`<stream>.dead`
//!   unless set in [`JetStreamOptions`]; a stream must capture it)
//!   with the reason in its `idem-reason` header ([`DEAD_LETTER_REASON`](crate::DEAD_LETTER_REASON)) and the
//!   subject in `idem-source`, then `+TERM`.
//! - **Deliveries**: the message's `num_delivered`.
//!
//! A consumer frozen past `ack_wait` acks late and JetStream accepts it
//! (nats-io/nats-server#4786): the ack does not say which delivery it is
//! for. The claim's fencing (the effect committed with the record) is what
//! keeps its effect from landing twice.
//!
//! Publishing downstream from a handler: [`publish_once`] sets `Nats-Msg-Id`
//! from the claim's downstream key, so JetStream drops a takeover's
//! republish within the stream's duplicate window (2 minutes by default);
//! past the window it is stored again, and the next consumer's idem (keyed
//! by message id) runs it once.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream::ConsumerErrorKind;
use async_nats::jetstream::{AckKind, Context};
use async_nats::HeaderMap;
use futures_util::StreamExt as _;
use idem_core::Claim;

use crate::batch::spawn_batch;
use crate::consumer::Consumer;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::permitted::Permitted;
use crate::running::{supervise, Ended, Running};
use crate::verdict::{Action, Verdict};

/// The header JetStream deduplicates publishes by.
pub const MSG_ID: &str = "Nats-Msg-Id";

/// The longest a pull request waits for messages (5 s, or the ack wait if
/// shorter); the client asks again as it expires.
const MAX_PULL_EXPIRY: Duration = Duration::from_secs(5);

/// How a stream is consumed: `JetStreamOptions::default()` and its
/// builder methods.
#[derive(Clone, Debug)]
pub struct JetStreamOptions {
    /// The durable pull consumer's name (created if missing).
    pub durable: String,
    /// How long JetStream waits for an ack before it delivers a message
    /// again (the durable's `ack_wait`, kept alive while a handler runs by
    /// reports in progress). `None` (the default): the consumer's lease,
    /// so that a frozen consumer's message goes to another one about when
    /// its claim expires. A durable that exists keeps the `ack_wait` it was
    /// made with.
    pub ack_wait: Option<Duration>,
    /// Where dead letters are published (`None`: `<stream>.dead`; a stream
    /// must capture it).
    pub dead_letter_subject: Option<String>,
    /// Handlers at once.
    pub parallelism: usize,
    /// Until when, draining how long, reconnecting how.
    pub running: Running,
}

impl Default for JetStreamOptions {
    /// The durable `idem`, acks awaited the consumer's lease, dead letters
    /// on `<stream>.dead`, 16 handlers at once, until the process ends.
    fn default() -> Self {
        Self {
            durable: "idem".to_owned(),
            ack_wait: None,
            dead_letter_subject: None,
            parallelism: 16,
            running: Running::default(),
        }
    }
}

impl JetStreamOptions {
    /// The durable pull consumer's name.
    #[must_use]
    pub fn durable(mut self, name: &str) -> Self {
        name.clone_into(&mut self.durable);
        self
    }

    /// The durable's `ack_wait`, in place of the consumer's lease.
    #[must_use]
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = Some(ack_wait);
        self
    }

    /// Dead letters on `subject` instead of `<stream>.dead`.
    #[must_use]
    pub fn dead_letter_subject(mut self, subject: &str) -> Self {
        self.dead_letter_subject = Some(subject.to_owned());
        self
    }

    /// Handlers at once.
    #[must_use]
    pub fn parallelism(mut self, parallelism: usize) -> Self {
        self.parallelism = parallelism;
        self
    }

    /// Until when, draining how long, reconnecting how.
    #[must_use]
    pub fn running(mut self, running: Running) -> Self {
        self.running = running;
        self
    }
}

/// One JetStream delivery.
pub struct JetStreamDelivery {
    message: Message,
    delivery: async_nats::jetstream::Message,
    js: Context,
    dead_letters: Arc<str>,
}

impl JetStreamDelivery {
    /// Wraps `delivery`; dead letters are published on `dead_letters` with `js`.
    pub fn new(
        delivery: async_nats::jetstream::Message,
        js: Context,
        dead_letters: Arc<str>,
    ) -> Self {
        Self {
            message: message_of(&delivery),
            delivery,
            js,
            dead_letters,
        }
    }
}

/// What the pipeline reads of a JetStream delivery.
pub fn message_of(delivery: &async_nats::jetstream::Message) -> Message {
    let mut headers = Vec::new();
    let mut id = None;
    if let Some(map) = &delivery.message.headers {
        for (name, values) in map.iter() {
            for value in values {
                let (name, value): (&str, &str) = (name.as_ref(), value.as_ref());
                if name.eq_ignore_ascii_case(MSG_ID) && id.is_none() {
                    id = Some(value.to_owned());
                }
                headers.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    let deliveries = delivery
        .info()
        .ok()
        .and_then(|info| u32::try_from(info.delivered).ok())
        .unwrap_or(1)
        .max(1);
    Message {
        payload: delivery.message.payload.clone(),
        id,
        headers,
        deliveries,
    }
}

fn broker(what: &str) -> impl FnOnce(async_nats::Error) -> BrokerError + '_ {
    move |e| BrokerError::new(format!("jetstream {what}"), e)
}

impl Delivery for JetStreamDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    async fn in_progress(&self) {
        if let Err(e) = self.delivery.ack_with(AckKind::Progress).await {
            tracing::debug!(target: "idem", error = %e, "jetstream: the in-progress ack failed");
        }
    }

    async fn settle(self, verdict: &Verdict) -> Result<(), BrokerError> {
        match &verdict.action {
            Action::Ack => self.delivery.double_ack().await.map_err(broker("ack")),
            Action::Redeliver { after } => self
                .delivery
                .ack_with(AckKind::Nak(Some(*after)))
                .await
                .map_err(broker("nak")),
            Action::DeadLetter { reason } => {
                let mut headers = self.delivery.message.headers.clone().unwrap_or_default();
                headers.insert(
                    crate::DEAD_LETTER_REASON,
                    reason.replace(['\r', '\n'], " ").as_str(),
                );
                headers.insert(
                    crate::DEAD_LETTER_SOURCE,
                    self.delivery.message.subject.as_str(),
                );
                self.js
                    .publish_with_headers(
                        self.dead_letters.to_string(),
                        headers,
                        self.delivery.message.payload.clone(),
                    )
                    .await
                    .map_err(|e| BrokerError::new("jetstream dead-letter publish", e))?
                    .await
                    .map_err(|e| BrokerError::new("jetstream dead-letter ack", e))?;
                self.delivery
                    .ack_with(AckKind::Term)
                    .await
                    .map_err(broker("term"))
            }
        }
    }
}

/// Consumes `stream` through its durable pull consumer (`options.durable`,
/// created with `options.ack_wait` if missing) with `consumer` until
/// `options.running`'s shutdown: at most `options.parallelism` handlers at
/// once. The messages the stream has ready are handed over together, as
/// one batch ([`Consumer::handle_batch`]): their claims are asked for at
/// once (one call on a store that batches them), a message delivered twice
/// in it runs once, and each one's handler permit goes back as soon as its
/// verdict is told.
///
/// The client reconnects by itself; a message stream that ends or fails (a
/// server restart, missed heartbeats) is asked for again with the backoff,
/// and logged. On shutdown it stops pulling, lets running handlers finish
/// within the drain and returns `Ok`. It returns an error only when
/// JetStream refuses what asking again cannot fix (a missing stream, a
/// durable of another configuration).
pub async fn consume<H: Handler>(
    consumer: Arc<Consumer<H>>,
    js: Context,
    stream: &str,
    options: JetStreamOptions,
) -> Result<(), BrokerError> {
    supervise("jetstream", &options.running, || {
        session(&consumer, &js, stream, &options)
    })
    .await
}

/// A JetStream API refusal (a bad request, a missing stream) ends for
/// good; anything else (no responders while the server restarts, a
/// timeout) is asked again.
fn ended<K>(what: &'static str, e: async_nats::error::Error<K>, api: Option<u16>) -> Ended
where
    K: Clone + std::fmt::Debug + std::fmt::Display + PartialEq + Send + Sync + 'static,
{
    let e = BrokerError::new(format!("jetstream {what}"), e);
    match api {
        Some(400 | 404) => Ended::Refused(e),
        _ => Ended::Lost(e),
    }
}

/// The status of a JetStream API error, if the error is one.
fn api_status(e: &async_nats::jetstream::Error) -> Option<u16> {
    u16::try_from(e.code()).ok()
}

/// One subscription's consumption, until it is lost or shutdown drains it.
async fn session<H: Handler>(
    consumer: &Arc<Consumer<H>>,
    js: &Context,
    stream: &str,
    options: &JetStreamOptions,
) -> Ended {
    let ack_wait = options
        .ack_wait
        .unwrap_or_else(|| consumer.engine().policy().lease_value());
    let setup = async {
        let source = js.get_stream(stream).await.map_err(|e| {
            let api = match e.kind() {
                GetStreamErrorKind::JetStream(api) => api_status(&api),
                _ => None,
            };
            ended("stream", e, api)
        })?;
        let pull: PullConsumer = source
            .get_or_create_consumer(
                &options.durable,
                pull::Config {
                    durable_name: Some(options.durable.clone()),
                    ack_wait,
                    ..pull::Config::default()
                },
            )
            .await
            .map_err(|e| {
                let api = match e.kind() {
                    ConsumerErrorKind::JetStream(api) => api_status(&api),
                    _ => None,
                };
                ended("durable consumer", e, api)
            })?;
        // A pull request outlives a consumer that froze: the server keeps
        // handing it messages (redeliveries too) until it expires. Expiring
        // within the ack wait, it is gone by the time a frozen consumer's
        // message is delivered again.
        let expires = ack_wait.min(MAX_PULL_EXPIRY);
        pull.stream()
            .expires(expires)
            .heartbeat(expires / 2)
            .messages()
            .await
            .map_err(|e| Ended::Lost(BrokerError::new("jetstream messages", e)))
    };
    let messages = match setup.await {
        Ok(messages) => messages,
        Err(ended) => return ended,
    };
    tracing::info!(target: "idem", stream, durable = %options.durable, "jetstream: consuming");
    let dead_letters: Arc<str> = Arc::from(
        options
            .dead_letter_subject
            .clone()
            .unwrap_or_else(|| format!("{stream}.dead")),
    );
    let parallelism = options.parallelism.max(1);
    let permits = Arc::new(tokio::sync::Semaphore::new(parallelism));
    let mut messages = messages.ready_chunks(parallelism);
    let mut running = tokio::task::JoinSet::new();
    let shutdown = options.running.shutdown.clone();
    loop {
        let ready = tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                // No more pulls; messages pulled and not handed over come
                // back after ack_wait.
                drop(messages);
                options.running.drain_out(&mut running, "jetstream").await;
                return Ended::Shutdown;
            }
            ready = messages.next() => ready,
        };
        let Some(ready) = ready else { break };
        let mut batch = Vec::with_capacity(ready.len());
        let mut failed = None;
        for delivery in ready {
            match delivery {
                Ok(delivery) => {
                    let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                        break;
                    };
                    let delivery =
                        JetStreamDelivery::new(delivery, js.clone(), Arc::clone(&dead_letters));
                    batch.push(Permitted::new(delivery, permit));
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        spawn_batch(&mut running, consumer, batch, "jetstream");
        if let Some(e) = failed {
            // Handlers still running finish on their own: dropping them
            // would leave their outcome unknown.
            running.detach_all();
            return Ended::Lost(BrokerError::new("jetstream delivery", e));
        }
        while running.try_join_next().is_some() {}
    }
    running.detach_all();
    Ended::Lost(BrokerError::new(
        "jetstream consume",
        "the pull consumer's message stream ended",
    ))
}

/// Publishes `payload` to `subject` from inside a handler with `Nats-Msg-Id`
/// derived from `claim` and `name`, and waits for JetStream's ack; a
/// republish after a takeover is the same message id, dropped as a
/// duplicate within the stream's window.
pub async fn publish_once(
    js: &Context,
    claim: &Claim,
    name: &str,
    subject: &str,
    payload: bytes::Bytes,
) -> Result<(), BrokerError> {
    let mut headers = HeaderMap::new();
    headers.insert(MSG_ID, claim.downstream_key(name).as_str());
    js.publish_with_headers(subject.to_owned(), headers, payload)
        .await
        .map_err(|e| BrokerError::new("jetstream publish", e))?
        .await
        .map_err(|e| BrokerError::new("jetstream publish ack", e))?;
    Ok(())
}
