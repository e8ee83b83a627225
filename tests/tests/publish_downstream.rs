//! A consumer that publishes downstream does so once: the message id comes
//! from its claim (`Claim::downstream_key`), the same for a takeover that
//! runs the handler again, so JetStream drops the republish
//! (`Nats-Msg-Id`, within the stream's window) and RabbitMQ's next
//! consumer, keyed by `message-id`, runs it once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use idem_core::{Claim, Engine, MemoryStore, Never, Policy};
use idem_queue::async_nats;
use idem_queue::async_nats::jetstream::{self, stream};
use idem_queue::lapin::options::{BasicConsumeOptions, ConfirmSelectOptions, QueueDeclareOptions};
use idem_queue::lapin::types::FieldTable;
use idem_queue::lapin::{Connection, ConnectionProperties};
use idem_queue::rabbitmq::{publish_once, RabbitDelivery};
use idem_queue::{handler_fn, Consumer, KeySource};
use idem_tests::brokers::amqp_url;
use idem_tests::{call, unique_prefix};

/// Runs `publish` under the claim for `key` twice: the first attempt
/// publishes and then dies (a panic: outcome unknown, the claim kept to its
/// lease), the second, after the lease, publishes again and completes.
async fn published_then_taken_over<F, Fut>(key: &str, publish: F)
where
    F: Fn(Claim) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let lease = Duration::from_millis(300);
    let store = MemoryStore::new();
    let engine = Engine::new(store.clone()).with_policy(Policy::default().lease(lease));
    let c = call("orders", key);
    let died = std::panic::AssertUnwindSafe(engine.run(&c, |claim| {
        let published = publish(claim);
        async move {
            published.await;
            panic!("the consumer died after publishing");
            #[allow(unreachable_code)]
            Ok::<(), Never>(())
        }
    }))
    .catch_unwind()
    .await;
    assert!(died.is_err());
    idem_tests::until_claim_lapsed(&store, c.record_id(), "the dead consumer").await;
    let again = engine
        .run(&c, |claim| {
            let published = publish(claim);
            async move {
                published.await;
                Ok::<(), Never>(())
            }
        })
        .await;
    assert!(
        matches!(again, Ok(idem_core::Ran::Executed(()))),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_jetstream_a_takeovers_republish_is_dropped_as_a_duplicate() {
    let js = jetstream::new(
        async_nats::connect("nats://127.0.0.1:4222")
            .await
            .expect("NATS"),
    );
    let name = unique_prefix("SHIPPED")
        .trim_end_matches(':')
        .replace([':', '-'], "_")
        .to_uppercase();
    let mut shipped = js
        .get_or_create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.out")],
            duplicate_window: Duration::from_mins(2),
            ..stream::Config::default()
        })
        .await
        .expect("stream");
    let subject = format!("{name}.out");
    published_then_taken_over("o-1", |claim| {
        let (js, subject) = (js.clone(), subject.clone());
        async move {
            idem_queue::nats::publish_once(&js, &claim, "shipped", &subject, "o-1 shipped".into())
                .await
                .expect("published");
        }
    })
    .await;
    let messages = shipped.info().await.expect("info").state.messages;
    assert_eq!(messages, 1, "JetStream kept one of the two publishes");
    js.delete_stream(&name).await.expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq_a_takeovers_republish_runs_once_at_the_next_consumer() {
    let connection = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .expect("RabbitMQ");
    let channel = connection.create_channel().await.expect("channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    let queue = unique_prefix("shipped").replace(':', "_");
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("queue");
    published_then_taken_over("o-2", |claim| {
        let (channel, queue) = (channel.clone(), queue.clone());
        async move {
            publish_once(
                &channel,
                &claim,
                "shipped",
                "",
                &queue,
                b"{\"order\":\"o-2\"}",
            )
            .await
            .expect("published");
        }
    })
    .await;
    // The next consumer, keyed by message id, gets both copies and runs once.
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&ran);
    let next = Consumer::new(
        Engine::new(MemoryStore::new()),
        "notify-customer",
        handler_fn(move |_: serde_json::Value, _claim: Claim| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Never>(())
            }
        }),
    )
    .key(KeySource::MessageId);
    let mut deliveries = channel
        .basic_consume(
            queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let dead: Arc<str> = Arc::from(format!("{queue}.dead"));
    for _ in 0..2 {
        let delivery = futures_util::StreamExt::next(&mut deliveries)
            .await
            .expect("a delivery")
            .expect("delivered");
        next.handle(RabbitDelivery::new(
            delivery,
            channel.clone(),
            Arc::clone(&dead),
        ))
        .await
        .expect("settled");
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the republish was a duplicate"
    );
}
