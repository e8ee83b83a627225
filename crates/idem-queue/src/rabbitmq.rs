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
//!   reason in its `x-idem-reason` header, and acknowledged once confirmed.
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
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel};

use crate::batch::spawn_batch;
use crate::consumer::Consumer;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::verdict::{Action, Verdict};

/// How a queue is consumed.
#[derive(Clone, Debug)]
pub struct RabbitOptions {
    /// Unacknowledged deliveries at once (`basic.qos`), and so handlers at once.
    pub prefetch: u16,
    /// Where dead letters go (`None`: `<queue>.dead`, declared durable).
    pub dead_letter_queue: Option<String>,
}

impl Default for RabbitOptions {
    /// 16 at once, dead letters to `<queue>.dead`.
    fn default() -> Self {
        Self {
            prefetch: 16,
            dead_letter_queue: None,
        }
    }
}

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
            Action::Ack => self
                .delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .map_err(broker("ack")),
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
                    ShortString::from("x-idem-reason"),
                    AMQPValue::LongString(reason.as_str().into()),
                );
                headers.insert(
                    ShortString::from("x-idem-queue"),
                    AMQPValue::LongString(self.delivery.routing_key.as_str().into()),
                );
                let properties = self.delivery.properties.clone().with_headers(headers);
                let confirm = self
                    .channel
                    .basic_publish(
                        "",
                        &self.dead_letters,
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
                self.delivery
                    .acker
                    .ack(BasicAckOptions::default())
                    .await
                    .map_err(broker("ack"))
            }
        }
    }
}

/// Consumes `queue` on `channel` with `consumer` until the channel closes
/// or the consumer is cancelled: at most `options.prefetch` deliveries at
/// once. The deliveries the channel has ready are handed over together, as
/// one batch ([`Consumer::handle_batch`]): their claims are asked for at
/// once (one call on a store that batches them), a message delivered twice
/// in it runs once, and each is acknowledged as soon as its verdict is
/// known, which frees its place in the prefetch window. The queue must exist; the
/// dead-letter queue is declared (durable) if missing, and the channel is
/// put in confirm mode.
pub async fn consume<H: Handler>(
    consumer: Arc<Consumer<H>>,
    channel: Channel,
    queue: &str,
    options: RabbitOptions,
) -> Result<(), BrokerError> {
    let dead_letters: Arc<str> = Arc::from(
        options
            .dead_letter_queue
            .clone()
            .unwrap_or_else(|| format!("{queue}.dead")),
    );
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(broker("confirm.select"))?;
    channel
        .queue_declare(
            &dead_letters,
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(broker("declaring the dead-letter queue"))?;
    channel
        .basic_qos(options.prefetch.max(1), BasicQosOptions::default())
        .await
        .map_err(broker("basic.qos"))?;
    let deliveries = channel
        .basic_consume(
            queue,
            "",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(broker("basic.consume"))?;
    let mut deliveries = deliveries.ready_chunks(usize::from(options.prefetch.max(1)));
    let mut running = tokio::task::JoinSet::new();
    while let Some(ready) = deliveries.next().await {
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
        spawn_batch(&mut running, &consumer, batch, "rabbitmq");
        if let Some(e) = failed {
            running.detach_all();
            return Err(broker("delivery")(e));
        }
        while running.try_join_next().is_some() {}
    }
    // Handlers still running finish on their own: dropping them would
    // leave their outcome unknown.
    running.detach_all();
    Err(BrokerError::new(
        "rabbitmq consume",
        format!("the consumer of {queue} was cancelled or its channel closed"),
    ))
}

/// Declares `queue` as a durable quorum queue (if it is not one already):
/// a quorum queue counts each message's deliveries (`x-delivery-count`),
/// which the poison cap ([`Consumer::max_deliveries`]) needs.
pub async fn declare_quorum_queue(channel: &Channel, queue: &str) -> Result<(), BrokerError> {
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue, durable, arguments)
        .await
        .map_err(broker("declaring the queue"))?;
    Ok(())
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
            exchange,
            routing_key,
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
