//! Amazon SQS through `aws-sdk-sqs` (feature `sqs`): long polling, batches
//! of up to ten, each message settled by the [`Consumer`]'s verdict.
//!
//! A message's body is the payload (JSON); its message attribute `id`, if
//! the producer set one, is its message id (SQS's own `MessageId` changes
//! with every send, so a producer's resend is a new message); its other
//! string attributes are headers; its `ApproximateReceiveCount` is its
//! delivery count.
//!
//! - **Ack**: `DeleteMessageBatch`, after the outcome is stored: a
//!   batch's acknowledged messages are deleted together once the batch is
//!   done (a message whose delete is lost comes back, and is answered from
//!   its record).
//! - **Redeliver after a delay**: `ChangeMessageVisibility` to the delay: the
//!   message comes back then, to any consumer.
//! - **In progress**: `ChangeMessageVisibility` to the visibility timeout
//!   again while the handler runs (the heartbeat), so that no other
//!   consumer receives it.
//! - **Taking over**: a crashed or frozen consumer's message becomes
//!   visible again when its visibility timeout ends (by default the
//!   consumer's lease): another consumer receives it, and its claim is
//!   taken over about then.
//! - **Dead-letter**: where the queue has a redrive policy (and the
//!   consumer was given no dead-letter queue of its own), the message is
//!   made visible again at once and left to the policy: SQS moves it to
//!   the policy's dead-letter queue once it is received more than
//!   `maxReceiveCount` times, and the reason is logged. Otherwise
//!   `SendMessage` to the dead-letter queue (the one given, or
//!   `<queue>-dead`, made at start; `<name>-dead.fifo` for a FIFO queue)
//!   with the reason, then `DeleteMessage`.
//! - **FIFO queues**: a batch's messages of one `MessageGroupId` run one
//!   after another, in order ([`BatchOptions::group_by`](crate::BatchOptions)).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName,
};
use aws_sdk_sqs::Client;

use crate::batch::BatchOptions;
use crate::consumer::Consumer;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::running::{supervise, Ended};
use crate::sqs_dead_letters::{dead_letters, DeadLetters};
use crate::sqs_errors::{broker, ended};
pub use crate::sqs_options::SqsOptions;
use crate::verdict::{Action, Verdict};

/// SQS's longest visibility timeout: twelve hours.
const MAX_VISIBILITY: Duration = Duration::from_hours(12);

/// Where a delivery's message lives, shared by a batch's deliveries.
struct Place {
    client: Client,
    queue_url: String,
    visibility: Duration,
    dead_letters: DeadLetters,
    fifo: bool,
    /// The receipts of the batch's acknowledged messages, deleted together
    /// once the batch is done ([`Place::delete_acked`]).
    acked: Mutex<Vec<String>>,
}

impl Place {
    /// Deletes the acknowledged messages, ten to a `DeleteMessageBatch`. A
    /// message whose delete fails comes back after its visibility timeout,
    /// and is answered from its record.
    async fn delete_acked(&self) {
        let receipts =
            std::mem::take(&mut *self.acked.lock().unwrap_or_else(PoisonError::into_inner));
        for chunk in receipts.chunks(10) {
            let entries: Vec<DeleteMessageBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, receipt)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .build()
                        .ok()
                })
                .collect();
            let deleted = self
                .client
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
            match deleted {
                Ok(answer) if answer.failed().is_empty() => {}
                Ok(answer) => {
                    tracing::warn!(target: "idem", failed = answer.failed().len(), "sqs: some acknowledged messages were not deleted; they come back and are answered from their records");
                }
                Err(e) => {
                    tracing::warn!(target: "idem", error = %e, "sqs: the acknowledged messages were not deleted; they come back and are answered from their records");
                }
            }
        }
    }
}

/// One SQS message delivered to this consumer.
pub struct SqsDelivery {
    message: Message,
    receipt: String,
    group: Option<String>,
    place: Arc<Place>,
}

/// Whole seconds, as SQS counts its timeouts, rounded up: a message asked
/// back after 200 ms comes back after a second, never at once (at most
/// twelve hours).
fn whole_seconds(d: Duration) -> i32 {
    let millis = d.min(MAX_VISIBILITY).as_millis();
    i32::try_from(millis.div_ceil(1000)).unwrap_or(i32::MAX)
}

/// [`whole_seconds`], at least one.
fn seconds(d: Duration) -> i32 {
    whole_seconds(d).max(1)
}

impl SqsDelivery {
    async fn hide_for(&self, for_: Duration) -> Result<(), BrokerError> {
        let p = &self.place;
        p.client
            .change_message_visibility()
            .queue_url(&p.queue_url)
            .receipt_handle(&self.receipt)
            .visibility_timeout(whole_seconds(for_))
            .send()
            .await
            .map_err(broker("ChangeMessageVisibility"))?;
        Ok(())
    }

    async fn delete(&self) -> Result<(), BrokerError> {
        let p = &self.place;
        p.client
            .delete_message()
            .queue_url(&p.queue_url)
            .receipt_handle(&self.receipt)
            .send()
            .await
            .map_err(broker("DeleteMessage"))?;
        Ok(())
    }
}

fn text(value: &str) -> Result<MessageAttributeValue, BrokerError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| BrokerError::new("sqs message attribute", e))
}

impl Delivery for SqsDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    async fn in_progress(&self) {
        if let Err(e) = self.hide_for(self.place.visibility).await {
            tracing::debug!(target: "idem", error = %e, "sqs: the heartbeat failed");
        }
    }

    async fn settle(self, verdict: &Verdict) -> Result<(), BrokerError> {
        match &verdict.action {
            Action::Ack => {
                // Deleted with the batch's others once the batch is done.
                self.place
                    .acked
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(self.receipt);
                Ok(())
            }
            Action::Redeliver { after } => self.hide_for(*after).await,
            Action::DeadLetter { reason } => {
                let p = &self.place;
                let dead_letters = match &p.dead_letters {
                    DeadLetters::Queue(url) => url,
                    DeadLetters::Redrive {
                        target,
                        max_receives,
                    } => {
                        tracing::error!(target: "idem", id = ?self.message.id, reason = %reason, dead_letters = %target, max_receives, "sqs: a dead letter is left to the queue's redrive policy to move");
                        return self.hide_for(Duration::ZERO).await;
                    }
                };
                let body = String::from_utf8_lossy(&self.message.payload).into_owned();
                let mut send = p
                    .client
                    .send_message()
                    .queue_url(dead_letters)
                    .message_body(body)
                    .message_attributes(crate::DEAD_LETTER_REASON, text(reason)?)
                    .message_attributes(crate::DEAD_LETTER_SOURCE, text(&p.queue_url)?);
                if let Some(id) = &self.message.id {
                    send = send.message_attributes("id", text(id)?);
                }
                if p.fifo {
                    // One dead letter per received message: its receipt
                    // names it.
                    send = send
                        .message_group_id(self.group.as_deref().unwrap_or("dead"))
                        .message_deduplication_id(dedup_id(&self.receipt));
                }
                send.send().await.map_err(broker("SendMessage"))?;
                self.delete().await
            }
        }
    }
}

/// A FIFO deduplication id (at most 128 characters) for a receipt.
fn dedup_id(receipt: &str) -> String {
    receipt
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .rev()
        .take(128)
        .collect()
}

/// Consumes the queue at `queue_url` with `consumer`, until
/// `options.running`'s shutdown: long polls of up to `batch` messages, each
/// batch run by [`Consumer::handle_batch`] (messages of one
/// `MessageGroupId` in order, on a FIFO queue).
///
/// Lost connections and throttling are retried with the backoff, and
/// logged. On shutdown it stops receiving, lets the running batch finish
/// within the drain and returns `Ok`; what did not finish comes back when
/// its visibility timeout ends. It returns an error only when SQS refuses
/// what retrying cannot fix (a missing queue, credentials, permissions).
pub async fn consume<H: Handler>(
    consumer: Arc<Consumer<H>>,
    client: Client,
    queue_url: &str,
    options: SqsOptions,
) -> Result<(), BrokerError> {
    supervise("sqs", &options.running, || {
        session(&consumer, &client, queue_url, &options)
    })
    .await
}

/// One session's consumption, until a receive fails or shutdown drains it.
async fn session<H: Handler>(
    consumer: &Arc<Consumer<H>>,
    client: &Client,
    queue_url: &str,
    options: &SqsOptions,
) -> Ended {
    let fifo = std::path::Path::new(queue_url)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("fifo"));
    let dead_letters = match dead_letters(
        client,
        queue_url,
        fifo,
        options.dead_letter_queue_url.as_deref(),
        consumer.max_deliveries_value(),
    )
    .await
    {
        Ok(dead_letters) => dead_letters,
        Err(ended) => return ended,
    };
    tracing::info!(target: "idem", queue = queue_url, "sqs: consuming");
    let place = Arc::new(Place {
        client: client.clone(),
        queue_url: queue_url.to_owned(),
        visibility: options
            .visibility
            .unwrap_or_else(|| consumer.engine().policy().lease_value()),
        dead_letters,
        fifo,
        acked: Mutex::new(Vec::new()),
    });
    let batch = options.batch.clamp(1, 10);
    let shutdown = &options.running.shutdown;
    loop {
        let received = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ended::Shutdown,
            received = receive(&place, batch, options.wait) => received,
        };
        let deliveries = match received {
            Ok(deliveries) => deliveries,
            Err(ended) => return ended,
        };
        if deliveries.is_empty() {
            continue;
        }
        let handled = consumer.handle_batch(
            deliveries,
            BatchOptions {
                parallelism: usize::try_from(batch).unwrap_or(1),
                group_by: fifo.then_some(group_of as fn(&Message) -> Option<String>),
            },
        );
        let Some(report) = options.running.within_drain(handled).await else {
            tracing::warn!(target: "idem", drain = ?options.running.drain, "shutdown: a batch still running past the drain is left; its messages come back after their visibility timeout");
            place.delete_acked().await;
            return Ended::Shutdown;
        };
        place.delete_acked().await;
        for failed in report.items.iter().filter_map(|i| i.as_ref().err()) {
            tracing::warn!(target: "idem", error = %failed, "sqs: the verdict could not be told; the message comes back after its visibility timeout");
        }
    }
}

/// The header a FIFO message's group is carried in, for `group_by`.
const GROUP_HEADER: &str = "x-sqs-message-group-id";

fn group_of(message: &Message) -> Option<String> {
    message.header(GROUP_HEADER).map(str::to_owned)
}

/// One long poll: up to `batch` messages, hidden for the visibility timeout.
async fn receive(
    place: &Arc<Place>,
    batch: i32,
    wait: Duration,
) -> Result<Vec<SqsDelivery>, Ended> {
    let received = place
        .client
        .receive_message()
        .queue_url(&place.queue_url)
        .max_number_of_messages(batch)
        .wait_time_seconds(i32::try_from(wait.as_secs().min(20)).unwrap_or(20))
        .visibility_timeout(seconds(place.visibility))
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .message_attribute_names("All")
        .send()
        .await
        .map_err(ended("ReceiveMessage"))?;
    Ok(received
        .messages()
        .iter()
        .filter_map(|m| {
            let Some(receipt) = m.receipt_handle() else {
                tracing::warn!(target: "idem", "sqs: a message without a receipt handle is left");
                return None;
            };
            let system = m.attributes();
            let count = system
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let group = system
                .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned();
            let mut message =
                Message::new(m.body().unwrap_or("").as_bytes().to_vec()).delivered(count);
            let mut headers: Vec<(String, String)> = m
                .message_attributes()
                .into_iter()
                .flatten()
                .filter_map(|(name, value)| Some((name.clone(), value.string_value()?.to_owned())))
                .collect();
            headers.sort();
            for (name, value) in headers {
                if name == "id" {
                    message = message.with_id(value);
                } else {
                    message = message.with_header(name, value);
                }
            }
            if let Some(group) = &group {
                message = message.with_header(GROUP_HEADER, group.clone());
            }
            Some(SqsDelivery {
                message,
                receipt: receipt.to_owned(),
                group,
                place: Arc::clone(place),
            })
        })
        .collect())
}
