//! RabbitMQ through `lapin` (feature `rabbitmq`): a queue consumed with
//! manual acknowledgements, each delivery settled by the [`Consumer`]'s
//! verdict.
//!
//! - **Ack**: `basic.ack`, after the outcome is stored.
//! - **Redeliver after a delay**: RabbitMQ has no delayed requeue, so the
//!   delivery is held (unacknowledged, counted against the prefetch) for
//!   the delay and then `basic.nack` with requeue. If the consumer dies
//!   meanwhile, RabbitMQ requeues it as it does any unacknowledged message.
//! - **Dead-letter**: the message is published (with publisher confirms) to
//!   the dead-letter queue, `<queue>.dead` unless set otherwise, with the
//!   reason in its `idem-reason` header ([`DEAD_LETTER_REASON`](crate::DEAD_LETTER_REASON)) and the
//!   queue in `idem-source`, and acknowledged once confirmed.
//! - **Deliveries**: a quorum queue's `x-delivery-count` (deliveries before
//!   this one), so the poison cap counts; on a classic queue only the
//!   `redelivered` flag is known (1 or 2). Use quorum queues.
//!
//! Publishing downstream from a handler: [`publish_once`] sets the AMQP
//! `message-id` from the claim's downstream key, stable across a takeover,
//! so the next consumer's idem sees a republish as a duplicate.

use std::sync::Arc;

use futures_util::StreamExt as _;
use idem_core::Claim;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ErrorKind};

use crate::batch::spawn_batch;
use crate::consumer::Consumer;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::rabbit_options::with_heartbeat;
pub use crate::rabbit_options::{default_heartbeat, RabbitOptions};
use crate::running::{supervise, Ended};
use crate::verdict::{Action, Verdict};

/// One RabbitMQ delivery.
pub struct RabbitDelivery {
    message: Message,
    delivery: lapin::message::Delivery,
    channel: Channel,
    dead_letters: Arc<str>,
}

impl RabbitDelivery {
    /// Wraps `delivery`, received on `channel`; dead letters go to the
    /// queue `dead_letters` (on a channel in confirm mode).
    pub fn new(
        delivery: lapin::message::Delivery,
        channel: Channel,
        dead_letters: Arc<str>,
    ) -> Self {
        Self {
            message: message_of(&delivery),
            delivery,
            channel,
            dead_letters,
        }
    }
}

/// What the pipeline reads of an AMQP delivery.
pub fn message_of(delivery: &lapin::message::Delivery) -> Message {
    let properties = &delivery.properties;
    let mut headers = Vec::new();
    let mut count = None;
    if let Some(table) = properties.headers() {
        for (name, value) in table.inner() {
            let text = match value {
                AMQPValue::LongString(s) => {
                    Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
                }
                AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
                AMQPValue::LongLongInt(n) => Some(n.to_string()),
                AMQPValue::LongInt(n) => Some(n.to_string()),
                _ => None,
            };
            if name.as_str() == "x-delivery-count" {
                count = text.as_deref().and_then(|t| t.parse::<u32>().ok());
            }
            if let Some(text) = text {
                headers.push((name.as_str().to_owned(), text));
            }
        }
    }
    let deliveries = match count {
        Some(before) => before.saturating_add(1),
        None if delivery.redelivered => 2,
        None => 1,
    };
    Message {
        payload: delivery.data.clone().into(),
        id: properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned()),
        headers,
        deliveries,
    }
}

fn broker(what: &str) -> impl FnOnce(lapin::Error) -> BrokerError + '_ {
    move |e| BrokerError::new(format!("rabbitmq {what}"), e)
}

impl Delivery for RabbitDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    async fn settle(self, verdict: &Verdict) -> Result<(), BrokerError> {
        match &verdict.action {
            Action::Ack => acked(
                self.delivery
                    .acker
                    .ack(BasicAckOptions::default())
                    .await
                    .map_err(broker("ack"))?,
            ),
            Action::Redeliver { after } => {
                let (acker, after) = (self.delivery.acker, *after);
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let requeue = BasicNackOptions {
                        requeue: true,
                        ..BasicNackOptions::default()
                    };
                    if let Err(e) = acker.nack(requeue).await {
                        // The channel is gone: RabbitMQ requeues it anyway.
                        tracing::debug!(target: "idem", error = %e, "rabbitmq: a delayed requeue found the channel closed");
                    }
                });
                Ok(())
            }
            Action::DeadLetter { reason } => {
                let mut headers = self
                    .delivery
                    .properties
                    .headers()
                    .clone()
                    .unwrap_or_default();
                headers.insert(
                    ShortString::from(crate::DEAD_LETTER_REASON),
                    AMQPValue::LongString(reason.as_str().into()),
                );
                headers.insert(
                    ShortString::from(crate::DEAD_LETTER_SOURCE),
                    AMQPValue::LongString(self.delivery.routing_key.as_str().into()),
                );
                let properties = self.delivery.properties.clone().with_headers(headers);
                let confirm = self
                    .channel
                    .basic_publish(
                        ShortString::from(""),
                        ShortString::from(&*self.dead_letters),
                        BasicPublishOptions::default(),
                        &self.delivery.data,
                        properties,
                    )
                    .await
                    .map_err(broker("dead-letter publish"))?
                    .await
                    .map_err(broker("dead-letter confirm"))?;
                if confirm.is_nack() {
                    return Err(BrokerError::new(
                        "rabbitmq dead-letter",
                        "the broker refused the dead letter; the message stays unacknowledged",
                    ));
                }
                acked(
                    self.delivery
                        .acker
                        .ack(BasicAckOptions::default())
                        .await
                        .map_err(broker("ack"))?,
                )
            }
        }
    }
}

/// An ack the channel took (`true`), or one it could not take: its
/// channel closed first, and the broker delivers the message again.
fn acked(taken: bool) -> Result<(), BrokerError> {
    if taken {
        return Ok(());
    }
    Err(BrokerError::new(
        "rabbitmq ack",
        "the channel closed before the ack; the broker delivers the message again",
    ))
}

/// Consumes `queue` from the broker at `url` with `consumer` until
/// `options.running`'s shutdown: at most `options.prefetch` deliveries at
/// once. The deliveries the channel has ready are handed over together, as
/// one batch ([`Consumer::handle_batch`]): their claims are asked for at
/// once (one call on a store that batches them), a message delivered twice
/// in it runs once, and each is acknowledged as soon as its verdict is
/// known, which frees its place in the prefetch window. The dead-letter
/// queue is declared (durable) if missing, and the channel is put in
/// confirm mode.
///
/// A lost connection (a broker restart, a network failure, missed
/// heartbeats) is made again with the backoff, and logged; unacknowledged
/// deliveries come back from the broker. On shutdown it cancels its
/// subscription, lets running handlers finish within the drain, closes the
/// connection and returns `Ok`. It returns an error only when the broker
/// refuses what connecting again cannot fix (credentials, a missing or
/// mismatched queue, a virtual host not allowed).
pub async fn consume<H: Handler>(
    consumer: Arc<Consumer<H>>,
    url: &str,
    queue: &str,
    options: RabbitOptions,
) -> Result<(), BrokerError> {
    supervise("rabbitmq", &options.running, || {
        session(&consumer, url, queue, &options)
    })
    .await
}

/// How a failed step ends the session: refused if the broker said no in a
/// way connecting again cannot change.
fn ended(what: &str) -> impl FnOnce(lapin::Error) -> Ended + '_ {
    move |e| {
        let refused = match e.kind() {
            ErrorKind::ProtocolError(amqp) => matches!(
                amqp.kind(),
                AMQPErrorKind::Soft(
                    AMQPSoftError::ACCESSREFUSED
                        | AMQPSoftError::NOTFOUND
                        | AMQPSoftError::PRECONDITIONFAILED
                ) | AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED)
            ),
            ErrorKind::InvalidProtocolVersion(_) => true,
            _ => false,
        };
        let e = broker(what)(e);
        if refused {
            Ended::Refused(e)
        } else {
            Ended::Lost(e)
        }
    }
}

/// One connection's consumption, until it is lost or shutdown drains it.
async fn session<H: Handler>(
    consumer: &Arc<Consumer<H>>,
    url: &str,
    queue: &str,
    options: &RabbitOptions,
) -> Ended {
    let setup = async {
        let heartbeat = options
            .heartbeat
            .unwrap_or_else(|| default_heartbeat(consumer.engine().policy().lease_value()));
        let uri = with_heartbeat(url, heartbeat).map_err(Ended::Refused)?;
        let connection = Connection::connect_uri(uri, options.connection.clone())
            .await
            .map_err(ended("connect"))?;
        let channel = connection
            .create_channel()
            .await
            .map_err(ended("channel"))?;
        let dead_letters: Arc<str> = Arc::from(
            options
                .dead_letter_queue
                .clone()
                .unwrap_or_else(|| format!("{queue}.dead")),
        );
        if options.declare_quorum_queue {
            declare(&channel, queue, "quorum")
                .await
                .map_err(ended("declaring the queue"))?;
        }
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(ended("confirm.select"))?;
        declare(&channel, &dead_letters, "classic")
            .await
            .map_err(ended("declaring the dead-letter queue"))?;
        channel
            .basic_qos(options.prefetch.max(1), BasicQosOptions::default())
            .await
            .map_err(ended("basic.qos"))?;
        let deliveries = channel
            .basic_consume(
                queue.into(),
                ShortString::from(""),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(ended("basic.consume"))?;
        Ok((connection, channel, dead_letters, deliveries))
    };
    let (connection, channel, dead_letters, deliveries) = match setup.await {
        Ok(set) => set,
        Err(ended) => return ended,
    };
    tracing::info!(target: "idem", queue, "rabbitmq: consuming");
    let tag = deliveries.tag();
    let mut deliveries = deliveries.ready_chunks(usize::from(options.prefetch.max(1)));
    let mut running = tokio::task::JoinSet::new();
    let shutdown = options.running.shutdown.clone();
    loop {
        let ready = tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                // No more deliveries; those prefetched and not handed over
                // are requeued when the connection closes.
                let _ = channel.basic_cancel(tag.clone(), BasicCancelOptions::default()).await;
                options.running.drain_out(&mut running, "rabbitmq").await;
                let _ = connection.close(200, "shutdown".into()).await;
                return Ended::Shutdown;
            }
            ready = deliveries.next() => ready,
        };
        let Some(ready) = ready else { break };
        let mut batch = Vec::with_capacity(ready.len());
        let mut failed = None;
        for delivery in ready {
            match delivery {
                Ok(delivery) => batch.push(RabbitDelivery::new(
                    delivery,
                    channel.clone(),
                    Arc::clone(&dead_letters),
                )),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        spawn_batch(&mut running, consumer, batch, "rabbitmq");
        if let Some(e) = failed {
            // Handlers still running finish on their own (their settling
            // fails with the channel; the broker requeues their messages).
            running.detach_all();
            return ended("delivery")(e);
        }
        while running.try_join_next().is_some() {}
    }
    running.detach_all();
    Ended::Lost(BrokerError::new(
        "rabbitmq consume",
        format!("the consumer of {queue} was cancelled or its channel closed"),
    ))
}

/// Declares `queue`, durable, of `kind` (`quorum` or `classic`), if it is
/// not there.
async fn declare(channel: &Channel, queue: &str, kind: &str) -> Result<(), lapin::Error> {
    let mut arguments = FieldTable::default();
    if kind == "quorum" {
        arguments.insert("x-queue-type".into(), AMQPValue::LongString(kind.into()));
    }
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.into(), durable, arguments)
        .await?;
    Ok(())
}

/// Declares `queue` as a durable quorum queue (if it is not one already):
/// a quorum queue counts each message's deliveries (`x-delivery-count`),
/// which the poison cap ([`Consumer::max_deliveries`]) needs.
pub async fn declare_quorum_queue(channel: &Channel, queue: &str) -> Result<(), BrokerError> {
    declare(channel, queue, "quorum")
        .await
        .map_err(broker("declaring the queue"))
}

/// Publishes `payload` (JSON) to `exchange` with `routing_key` from inside a
/// handler, with the AMQP `message-id` derived from `claim` and `name`: the
/// same on a takeover's republish, so the next consumer (keyed by message
/// id) runs it once. Waits for the publisher confirm (the channel must be
/// in confirm mode).
pub async fn publish_once(
    channel: &Channel,
    claim: &Claim,
    name: &str,
    exchange: &str,
    routing_key: &str,
    payload: &[u8],
) -> Result<(), BrokerError> {
    let id = claim.downstream_key(name);
    let properties = BasicProperties::default()
        .with_message_id(id.as_str().into())
        .with_content_type("application/json".into())
        .with_delivery_mode(2);
    let confirm = channel
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            BasicPublishOptions::default(),
            payload,
            properties,
        )
        .await
        .map_err(broker("publish"))?
        .await
        .map_err(broker("publish confirm"))?;
    if confirm.is_nack() {
        return Err(BrokerError::new(
            "rabbitmq publish",
            "the broker refused the message",
        ));
    }
    Ok(())
}
