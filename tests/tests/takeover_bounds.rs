//! How long a frozen consumer keeps an order from the others, on each
//! broker with idem-queue's defaults (no heartbeat in the AMQP URL, no
//! `ack_wait`, no `min_idle`): the order examples as separate processes,
//! one `SIGSTOP`ped mid-order, another started beside it. The order ships
//! once, on the other consumer, within the bound the guide states for the
//! broker (docs/guide/consumers.md, "A frozen consumer").

use std::time::{Duration, Instant};

use idem_queue::rabbitmq::default_heartbeat;
use idem_tests::brokers::{order_shipments, Broker, JetStream, RabbitMq, RedisStream, PATIENCE};
use idem_tests::{redis_url, unique_prefix, Worker};

/// The claim's lease the workers run with.
const LEASE: Duration = Duration::from_secs(3);

/// What the guide allows beyond each broker's bound: the redelivery's
/// backoff (200 ms at first), polling, and two processes starting on two
/// busy cores.
const SLACK: Duration = Duration::from_secs(3);

/// A consumer frozen mid-order, with the broker's defaults: another
/// consumer ships the order within `bound` of the freeze, and only once.
async fn a_frozen_consumer_s_order_ships_elsewhere_within_the_bound<B: Broker>(
    broker: B,
    bound: Duration,
) {
    let prefix = unique_prefix("takeover");
    let env = |delay: &str| {
        let mut env = broker.default_env();
        env.push(("REDIS_URL", redis_url()));
        env.push(("PREFIX", prefix.clone()));
        env.push(("LEASE_MS", LEASE.as_millis().to_string()));
        env.push(("SHIP_DELAY_MS", delay.to_owned()));
        env
    };
    let mut first = Worker::start(B::EXAMPLE, &env("4000"));
    broker
        .publish(r#"{"order_id":"o-1","sku":"tea","qty":1}"#)
        .await;
    first.wait_for("shipping o-1", PATIENCE);
    first.freeze();
    let frozen = Instant::now();
    let second = Worker::start(B::EXAMPLE, &env("0"));
    second.wait_for("shipped o-1", PATIENCE);
    let took = frozen.elapsed();
    first.resume();
    first.wait_for_any_or_exit(&["fenced o-1", "shipped o-1"], PATIENCE);
    assert_eq!(order_shipments(&prefix, "o-1").await, 1);
    assert_eq!(
        first.count("shipped o-1"),
        0,
        "the frozen consumer was fenced"
    );
    println!("taken over {took:?} after the freeze (bound {bound:?})");
    assert!(
        took <= bound,
        "taken over {took:?} after the freeze, past the bound {bound:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq_a_frozen_consumer_s_order_ships_elsewhere_within_the_lease_or_the_heartbeat() {
    // The broker drops a connection silent for two to three heartbeats,
    // then requeues its deliveries.
    let bound = LEASE.max(default_heartbeat(LEASE) * 3) + SLACK;
    a_frozen_consumer_s_order_ships_elsewhere_within_the_bound(RabbitMq::new().await, bound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_jetstream_a_frozen_consumer_s_order_ships_elsewhere_within_the_lease() {
    a_frozen_consumer_s_order_ships_elsewhere_within_the_bound(
        JetStream::new().await,
        LEASE + SLACK,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_streams_a_frozen_consumer_s_order_ships_elsewhere_within_the_lease() {
    a_frozen_consumer_s_order_ships_elsewhere_within_the_bound(RedisStream::new(), LEASE + SLACK)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqs_a_frozen_consumer_s_order_ships_elsewhere_within_the_lease() {
    // The visibility timeout is the lease, counted by SQS in whole seconds.
    a_frozen_consumer_s_order_ships_elsewhere_within_the_bound(
        idem_tests::sqs_queue::SqsQueue::new().await,
        LEASE + SLACK,
    )
    .await;
}
