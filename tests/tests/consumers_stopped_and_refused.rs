//! Consumers as operators run them. Stopped with SIGTERM in the middle of
//! an order (a deploy, a scale-down), a consumer ships that order once,
//! takes nothing new, exits by itself, and leaves the rest to the next
//! consumer. Pointed at what the broker will not let it use, it stops with
//! an error that says so, instead of connecting again forever.

use std::sync::Arc;
use std::time::Duration;

use idem_core::Never;
use idem_core::{Claim, Engine, MemoryStore};
use idem_queue::{handler_fn, Consumer, Handler};
use idem_tests::brokers::{amqp_url, Broker, JetStream, RabbitMq, RedisStream};
use idem_tests::{unique_prefix, Worker};

fn order(id: &str) -> String {
    format!(r#"{{"order_id":"{id}","sku":"tea","qty":1}}"#)
}

async fn a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest<B: Broker>(broker: B) {
    let mut env = broker.env(1000);
    env.push(("PREFIX", unique_prefix("orders-stop")));
    env.push(("SHIP_DELAY_MS", "1500".to_owned()));
    env.push(("LEASE_MS", "2000".to_owned()));
    let mut first = Worker::start(B::EXAMPLE, &env);
    broker.publish(&order("stop-1")).await;
    first.wait_for("shipping stop-1", Duration::from_secs(30));
    first.terminate();
    first.wait_for("stopping", Duration::from_secs(10));
    // Published once the consumer was asked to stop: not its to take.
    broker.publish(&order("stop-2")).await;
    let status = first
        .wait_exit(Duration::from_secs(30))
        .expect("the consumer exits by itself once its order is done");
    assert!(status.success(), "a clean exit: {status:?}");
    assert_eq!(
        first.count("shipped stop-1"),
        1,
        "the running order finished"
    );
    assert_eq!(
        first.count("shipping stop-2"),
        0,
        "no new work after SIGTERM"
    );
    // The next consumer ships what was left, and not what was acknowledged.
    let next = Worker::start(B::EXAMPLE, &env);
    next.wait_for("shipped stop-2", Duration::from_secs(30));
    assert_eq!(next.count("shipping stop-1"), 0, "stop-1 was acknowledged");
    assert!(
        broker.dead_letters().await.is_empty(),
        "nothing dead-lettered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq_a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest() {
    a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest(RabbitMq::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_jetstream_a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest() {
    a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest(JetStream::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_streams_a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest() {
    a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest(RedisStream::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqs_a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest() {
    a_consumer_stopped_mid_order_ships_it_once_and_leaves_the_rest(
        idem_tests::sqs_queue::SqsQueue::new().await,
    )
    .await;
}

fn consumer() -> Arc<Consumer<impl Handler>> {
    let handler = handler_fn(|_: serde_json::Value, _: Claim| async { Ok::<_, Never>(()) });
    Arc::new(Consumer::new(
        Engine::new(MemoryStore::new()),
        "refused",
        handler,
    ))
}

/// What a refused consumer said, within `limit` (it must not retry).
async fn refused<F>(consume: F, limit: Duration) -> String
where
    F: std::future::Future<Output = Result<(), idem_queue::BrokerError>>,
{
    tokio::time::timeout(limit, consume)
        .await
        .expect("a refusal ends the consumer; it does not connect again forever")
        .expect_err("refused")
        .to_string()
}

#[tokio::test]
async fn a_rabbitmq_consumer_with_the_wrong_password_stops_and_says_so() {
    let url = amqp_url().replacen("guest:guest", "guest:not-the-password", 1);
    let said = refused(
        idem_queue::rabbitmq::consume(
            consumer(),
            &url,
            "orders",
            idem_queue::rabbitmq::RabbitOptions::default(),
        ),
        Duration::from_secs(20),
    )
    .await;
    assert!(
        said.contains("ACCESS_REFUSED") || said.contains("403"),
        "{said}"
    );
}

#[tokio::test]
async fn a_jetstream_consumer_of_a_stream_that_does_not_exist_stops_and_says_so() {
    let client = idem_queue::async_nats::connect("nats://127.0.0.1:4222")
        .await
        .expect("NATS");
    let js = idem_queue::async_nats::jetstream::new(client);
    let stream = unique_prefix("NO_SUCH")
        .replace([':', '-'], "_")
        .to_uppercase();
    let said = refused(
        idem_queue::nats::consume(
            consumer(),
            js,
            &stream,
            idem_queue::nats::JetStreamOptions::default(),
        ),
        Duration::from_secs(20),
    )
    .await;
    assert!(said.contains("stream"), "{said}");
}

#[tokio::test]
async fn a_redis_streams_consumer_of_a_key_that_is_not_a_stream_stops_and_says_so() {
    let client = idem_queue::redis::Client::open(idem_tests::redis_url()).expect("url");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis");
    let key = unique_prefix("not-a-stream");
    let () = idem_queue::redis::cmd("SET")
        .arg(&key)
        .arg("a string")
        .query_async(&mut c)
        .await
        .expect("SET");
    let said = refused(
        idem_queue::redis_streams::consume(
            consumer(),
            client,
            &key,
            idem_queue::redis_streams::StreamOptions::default(),
        ),
        Duration::from_secs(20),
    )
    .await;
    assert!(said.contains("WRONGTYPE"), "{said}");
}

#[tokio::test]
async fn an_sqs_consumer_of_a_queue_that_does_not_exist_stops_and_says_so() {
    let client = idem_tests::sqs_queue::sqs_client();
    let url = format!(
        "{}/000000000000/{}",
        idem_tests::sqs_queue::sqs_url(),
        unique_prefix("no-such-queue")
            .trim_end_matches(':')
            .replace(':', "_")
    );
    let said = refused(
        idem_queue::sqs::consume(
            consumer(),
            client,
            &url,
            idem_queue::sqs::SqsOptions::default().dead_letter_queue_url(&format!("{url}-dead")),
        ),
        Duration::from_secs(20),
    )
    .await;
    assert!(said.contains("ReceiveMessage"), "{said}");
}
