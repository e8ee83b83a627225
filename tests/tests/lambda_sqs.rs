//! AWS Lambda with an SQS event source, invoked through
//! `idem_queue::lambda::handle_sqs_event` with events as Lambda sends them
//! (the JSON of AWS's own example event): a batch whose records fail at
//! chosen positions reports exactly those, a duplicate in the batch ships
//! once, and a function that times out mid-order is retried and ships it
//! once, without waiting out the engine's lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use idem_core::{Claim, Engine, IdempotencyKey, MemoryStore, Policy, RecordId, Scope};
use idem_queue::lambda::aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use idem_queue::lambda::handle_sqs_event;
use idem_queue::lambda::lambda_runtime::{Context, LambdaEvent};
use idem_queue::{handler_fn, Consumer, Handler, KeySource};
use idem_tests::orders::{CarrierDown, Order};

/// Shipments by order, and a pause before each (to outlive an invocation).
#[derive(Clone, Default)]
struct Warehouse {
    shipped: Arc<Mutex<HashMap<String, u32>>>,
    pause: Duration,
}

impl Warehouse {
    fn shipped(&self, order: &str) -> u32 {
        self.shipped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(order)
            .copied()
            .unwrap_or(0)
    }

    fn consumer(&self, engine: Engine) -> Consumer<impl Handler> {
        let warehouse = self.clone();
        let ship = handler_fn(move |order: Order, _claim: Claim| {
            let warehouse = warehouse.clone();
            async move {
                tokio::time::sleep(warehouse.pause).await;
                if order.sku == "carrier-down" {
                    return Err(CarrierDown);
                }
                *warehouse
                    .shipped
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(order.order_id.clone())
                    .or_default() += 1;
                Ok(format!("shipped {}", order.order_id))
            }
        });
        Consumer::new(engine, "ship-order", ship).key(KeySource::Field("/order_id".into()))
    }
}

/// One record as Lambda sends it (AWS's example SQS event), carrying
/// `body`, received `receives` times.
fn record(message_id: &str, body: &str, receives: u32) -> serde_json::Value {
    serde_json::json!({
        "messageId": message_id,
        "receiptHandle": "MessageReceiptHandle",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": receives.to_string(),
            "SentTimestamp": "1523232000000",
            "SenderId": "123456789012",
            "ApproximateFirstReceiveTimestamp": "1523232000001"
        },
        "messageAttributes": {},
        "md5OfBody": "7b270e59b47ff90a553787216d55d91d",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
        "awsRegion": "us-east-1"
    })
}

/// An invocation with `records`, and `time` left before Lambda stops it.
fn invocation(records: &[serde_json::Value], time: Duration) -> LambdaEvent<SqsEvent> {
    let event: SqsEvent = serde_json::from_value(serde_json::json!({ "Records": records }))
        .expect("an SQS event as Lambda sends it");
    let mut context = Context::default();
    let deadline = SystemTime::now() + time;
    context.deadline = u64::try_from(
        deadline
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(u64::MAX);
    LambdaEvent::new(event, context)
}

fn failed(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

fn order(id: &str, sku: &str) -> String {
    format!(r#"{{"order_id":"{id}","sku":"{sku}"}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_reports_exactly_the_records_that_failed_and_ships_a_duplicate_once() {
    let warehouse = Warehouse::default();
    let consumer = warehouse.consumer(Engine::new(MemoryStore::new()));
    let records = vec![
        record("m-1", &order("o-1", "tea"), 1),
        record("m-2", &order("o-2", "carrier-down"), 1),
        record("m-3", &order("o-3", "tea"), 1),
        record("m-4", &order("o-4", "carrier-down"), 1),
        // The same order sent twice by the shop: a message of its own.
        record("m-5", &order("o-1", "tea"), 1),
    ];
    let response = handle_sqs_event(&consumer, invocation(&records, Duration::from_secs(30)))
        .await
        .expect("answered");
    assert_eq!(failed(&response), ["m-2", "m-4"]);
    assert_eq!(warehouse.shipped("o-1"), 1, "the duplicate shipped once");
    assert_eq!(warehouse.shipped("o-3"), 1);
    assert_eq!(warehouse.shipped("o-2") + warehouse.shipped("o-4"), 0);
    // SQS delivers the failed ones again; a shipped one delivered again is
    // answered from its record.
    let again = vec![
        record("m-2", &order("o-2", "carrier-down"), 2),
        record("m-1", &order("o-1", "tea"), 2),
    ];
    let response = handle_sqs_event(&consumer, invocation(&again, Duration::from_secs(30)))
        .await
        .expect("answered");
    assert_eq!(failed(&response), ["m-2"]);
    assert_eq!(warehouse.shipped("o-1"), 1, "not shipped again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_that_times_out_mid_order_is_retried_and_ships_it_once() {
    let store = MemoryStore::new();
    // A claim's lease far longer than the invocation.
    let engine =
        Engine::new(store.clone()).with_policy(Policy::default().lease(Duration::from_mins(1)));
    let slow = Warehouse {
        pause: Duration::from_secs(5),
        ..Warehouse::default()
    };
    let first = slow.consumer(engine.clone());
    let time = Duration::from_millis(300);
    let records = vec![record("m-9", &order("o-9", "tea"), 1)];
    // Lambda stops the function at its deadline: the invocation's future is
    // dropped mid-order.
    let stopped =
        tokio::time::timeout(time, handle_sqs_event(&first, invocation(&records, time))).await;
    assert!(stopped.is_err(), "the invocation timed out");
    // Its claim lapses with the invocation's time, not the engine's lease.
    let id = RecordId::new(
        &Scope::new("ship-order"),
        &IdempotencyKey::parse("o-9").expect("key"),
    );
    idem_tests::until_lease_lapsed(&store, &id, "the timed-out invocation").await;
    let warehouse = Warehouse {
        shipped: Arc::clone(&slow.shipped),
        pause: Duration::ZERO,
    };
    let retry = warehouse.consumer(engine);
    let records = vec![record("m-9", &order("o-9", "tea"), 2)];
    let response = handle_sqs_event(&retry, invocation(&records, Duration::from_secs(30)))
        .await
        .expect("answered");
    assert!(failed(&response).is_empty(), "{:?}", failed(&response));
    assert_eq!(warehouse.shipped("o-9"), 1, "shipped once");
}
