//! AWS Lambda with an SQS event source (feature `lambda`): a batch of SQS
//! messages handed to a function, each run once through the [`Consumer`],
//! the ones to deliver again reported as `batchItemFailures` (turn on
//! `ReportBatchItemFailures` on the event source mapping).
//!
//! - **Ack**: the message is not reported: Lambda deletes it.
//! - **Redeliver** (a transient failure, a duplicate in flight elsewhere):
//!   reported as a failure; SQS delivers it again after its visibility
//!   timeout.
//! - **Dead-letter** (a poison message, a key reused with another payload,
//!   a malformed message): reported as a failure and logged with its
//!   reason, so that the queue's redrive policy moves it to its dead-letter
//!   queue after `maxReceiveCount` receives. Lambda has nowhere else to
//!   put it; give the queue a redrive policy.
//! - **The claim's lease** is bounded by the invocation's time left
//!   ([`Delivery::lease_within`]): a function that times out mid-handler
//!   leaves a claim that lapses as Lambda stops it, and the retry takes the
//!   message over at once instead of waiting out the engine's lease.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use idem_core::{Claim, Engine, MemoryStore, Never};
//! use idem_queue::lambda::{handle_sqs_event, lambda_runtime};
//! use idem_queue::{handler_fn, Consumer, KeySource};
//!
//! #[derive(serde::Deserialize)]
//! struct Order {
//!     order_id: String,
//! }
//!
//! # async fn run() -> Result<(), lambda_runtime::Error> {
//! let ship = handler_fn(|order: Order, _claim: Claim| async move {
//!     Ok::<_, Never>(format!("shipped {}", order.order_id))
//! });
//! let consumer = Arc::new(
//!     Consumer::new(Engine::new(MemoryStore::new()), "ship-order", ship)
//!         .key(KeySource::Field("/order_id".into())),
//! );
//! lambda_runtime::run(lambda_runtime::service_fn(move |event| {
//!     let consumer = Arc::clone(&consumer);
//!     async move { handle_sqs_event(&consumer, event).await }
//! }))
//! .await
//! # }
//! ```

use std::time::{Duration, SystemTime};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::LambdaEvent;

use crate::batch::BatchOptions;
use crate::consumer::Consumer;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::verdict::{Action, Verdict};

pub use aws_lambda_events;
pub use lambda_runtime;

/// The header a FIFO message's group is carried in, for `group_by`.
const GROUP_HEADER: &str = "x-sqs-message-group-id";

/// One SQS record of the invocation's event.
struct LambdaDelivery {
    message: Message,
    deadline: SystemTime,
}

impl Delivery for LambdaDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    fn lease_within(&self) -> Option<Duration> {
        Some(
            self.deadline
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO),
        )
    }

    async fn settle(self, verdict: &Verdict) -> Result<(), BrokerError> {
        if let Action::DeadLetter { reason } = &verdict.action {
            tracing::error!(target: "idem", id = ?self.message.id, reason = %reason, "lambda: a dead letter is reported as a failure, for the queue's redrive policy to move");
        }
        Ok(())
    }
}

/// The message of an SQS record: its body, its `id` attribute as its
/// message id, its other string attributes as headers, its
/// `ApproximateReceiveCount` as its delivery count.
fn message_of(record: &SqsMessage) -> Message {
    let count = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let mut message = Message::new(record.body.clone().unwrap_or_default()).delivered(count);
    let mut headers: Vec<(&String, &str)> = record
        .message_attributes
        .iter()
        .filter_map(|(name, value)| Some((name, value.string_value.as_deref()?)))
        .collect();
    headers.sort_unstable();
    for (name, value) in headers {
        message = if name == "id" {
            message.with_id(value)
        } else {
            message.with_header(name.clone(), value)
        };
    }
    if let Some(group) = record.attributes.get("MessageGroupId") {
        message = message.with_header(GROUP_HEADER, group.clone());
    }
    message
}

fn group_of(message: &Message) -> Option<String> {
    message.header(GROUP_HEADER).map(str::to_owned)
}

/// Handles an SQS event's records with `consumer`, each run once whatever
/// Lambda and SQS deliver twice, and answers the records to deliver again
/// (`batchItemFailures`, by message id). Records of one `MessageGroupId`
/// (a FIFO queue) run in order, and after one that fails the rest of its
/// group is reported too, as Lambda requires.
///
/// # Errors
///
/// None of its own: every record's failure is reported in the answer, so
/// that the others are not delivered again.
pub async fn handle_sqs_event<H: Handler>(
    consumer: &Consumer<H>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    let deadline = event.context.deadline();
    let records = event.payload.records;
    let fifo = records
        .iter()
        .any(|r| r.attributes.contains_key("MessageGroupId"));
    let deliveries: Vec<LambdaDelivery> = records
        .iter()
        .map(|record| LambdaDelivery {
            message: message_of(record),
            deadline,
        })
        .collect();
    let report = consumer
        .handle_batch(
            deliveries,
            BatchOptions {
                parallelism: records.len().max(1),
                group_by: fifo.then_some(group_of as fn(&Message) -> Option<String>),
            },
        )
        .await;
    let mut response = SqsBatchResponse::default();
    for at in report.failures() {
        let Some(id) = records.get(at).and_then(|r| r.message_id.clone()) else {
            continue;
        };
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}
