//! An SQS queue that has a redrive policy keeps it: what the consumer
//! dead-letters (a message that is not JSON, a key reused for another
//! order, an order that keeps failing) ends in the queue the policy names,
//! moved there by SQS itself after `maxReceiveCount` receives, and no
//! `<queue>-dead` of idem's own is made beside it. On moto's server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use idem_core::{Claim, Engine, MemoryStore};
use idem_queue::aws_sdk_sqs::types::QueueAttributeName;
use idem_queue::aws_sdk_sqs::Client;
use idem_queue::sqs::{consume, SqsOptions};
use idem_queue::{handler_fn, Backoff, CancellationToken, Consumer, Handler, KeySource, Running};
use idem_tests::orders::{CarrierDown, Order};
use idem_tests::sqs_queue::sqs_client;

/// How many receives the queue's redrive policy allows a message.
const MAX_RECEIVES: u32 = 3;

async fn queue_url(client: &Client, name: &str, policy: Option<String>) -> String {
    let mut create = client.create_queue().queue_name(name);
    if let Some(policy) = policy {
        create = create.attributes(QueueAttributeName::RedrivePolicy, policy);
    }
    let made = create
        .send()
        .await
        .expect("CreateQueue (moto: scripts/services.sh)");
    made.queue_url().expect("its url").to_owned()
}

async fn attribute(client: &Client, url: &str, name: QueueAttributeName) -> String {
    let got = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(name.clone())
        .send()
        .await
        .expect("GetQueueAttributes");
    got.attributes()
        .and_then(|a| a.get(&name))
        .cloned()
        .unwrap_or_default()
}

async fn waiting(client: &Client, url: &str) -> u64 {
    attribute(client, url, QueueAttributeName::ApproximateNumberOfMessages)
        .await
        .parse()
        .unwrap_or(0)
}

/// The bodies in the queue at `url`, looked at and left there.
async fn bodies(client: &Client, url: &str) -> Vec<String> {
    let got = client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .send()
        .await
        .expect("ReceiveMessage");
    let mut bodies: Vec<String> = got
        .messages()
        .iter()
        .map(|m| m.body().unwrap_or_default().to_owned())
        .collect();
    bodies.sort();
    bodies
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_mins(1),
            "waited a minute for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs of the handler, by order.
type Runs = Arc<Mutex<HashMap<String, u32>>>;

/// Ships orders, counting each run; an order of `carrier-down` always
/// fails (transiently). Dead-lettered at the second delivery.
fn shipper(runs: &Runs) -> Consumer<impl Handler> {
    let ship = {
        let runs = Arc::clone(runs);
        handler_fn(move |order: Order, _claim: Claim| {
            let runs = Arc::clone(&runs);
            async move {
                *runs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(order.order_id.clone())
                    .or_default() += 1;
                if order.sku == "carrier-down" {
                    return Err(CarrierDown);
                }
                Ok(format!("shipped {}", order.order_id))
            }
        })
    };
    Consumer::new(Engine::new(MemoryStore::new()), "ship-order", ship)
        .key(KeySource::Field("/order_id".into()))
        .max_deliveries(2)
        .backoff(Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(1),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_consumer_dead_letters_goes_where_the_queues_redrive_policy_says() {
    let client = sqs_client();
    let name = idem_tests::unique_prefix("redrive")
        .trim_end_matches(':')
        .replace([':', '.'], "_");
    let target_url = queue_url(&client, &format!("{name}-policy-target"), None).await;
    let target = attribute(&client, &target_url, QueueAttributeName::QueueArn).await;
    let policy = serde_json::json!({
        "deadLetterTargetArn": target,
        "maxReceiveCount": MAX_RECEIVES.to_string(),
    });
    let url = queue_url(&client, &name, Some(policy.to_string())).await;

    let runs: Runs = Arc::default();
    let consumer = shipper(&runs);
    let ran = |order: &str| {
        runs.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(order)
            .copied()
            .unwrap_or(0)
    };

    let shutdown = CancellationToken::new();
    let running = {
        let (client, url) = (client.clone(), url.clone());
        let options = SqsOptions::default()
            .wait(Duration::from_secs(1))
            .running(Running::default().until(shutdown.clone()));
        tokio::spawn(async move { consume(Arc::new(consumer), client, &url, options).await })
    };
    let send = |body: &str| {
        client
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
    };
    let tea = r#"{"order_id":"r-1","sku":"tea"}"#;
    send(tea).await.expect("SendMessage");
    until("the tea shipped", async || ran("r-1") == 1).await;
    let reused = r#"{"order_id":"r-1","sku":"coffee"}"#;
    let failing = r#"{"order_id":"r-2","sku":"carrier-down"}"#;
    let not_json = "an order, surely";
    for body in [reused, failing, not_json] {
        send(body).await.expect("SendMessage");
    }

    until("three dead letters in the policy's queue", async || {
        waiting(&client, &target_url).await == 3
    })
    .await;
    let mut expected = vec![reused.to_owned(), failing.to_owned(), not_json.to_owned()];
    expected.sort();
    assert_eq!(
        bodies(&client, &target_url).await,
        expected,
        "SQS moved each dead letter as it was sent"
    );
    until("the queue empty", async || {
        waiting(&client, &url).await == 0
    })
    .await;
    assert_eq!(
        ran("r-1"),
        1,
        "the tea shipped once, the reused key never ran"
    );
    assert_eq!(
        ran("r-2"),
        MAX_RECEIVES,
        "the failing order ran once a receive, until the policy moved it"
    );
    let own = client
        .get_queue_url()
        .queue_name(format!("{name}-dead"))
        .send()
        .await;
    assert!(
        own.is_err(),
        "no dead-letter queue of idem's own beside the policy's"
    );

    shutdown.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the consumer stops when asked");
    assert!(matches!(ended, Ok(Ok(()))), "a clean stop: {ended:?}");
}
