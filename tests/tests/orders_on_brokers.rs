//! The order examples on real brokers (RabbitMQ, NATS JetStream, Redis
//! Streams), as separate processes: duplicates, a consumer killed mid-order,
//! a consumer frozen past its lease whose message another consumer took
//! over, a poison message. Each order's shipments are counted in Redis,
//! where the handler commits them with idem's record; each story waits for
//! the broker to have nothing outstanding, then counts.

use std::time::{Duration, Instant};

use idem_tests::brokers::{Broker, JetStream, RabbitMq, RedisStream, PATIENCE};
use idem_tests::{redis_url, unique_prefix, Worker};

/// A story's worker settings: the broker's, Redis and the key prefix.
fn env<B: Broker>(
    broker: &B,
    prefix: &str,
    extra: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut env = broker.env(1000);
    env.push(("REDIS_URL", redis_url()));
    env.push(("PREFIX", prefix.to_owned()));
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    env
}

fn order(id: &str, sku: &str) -> String {
    format!(r#"{{"order_id":"{id}","sku":"{sku}","qty":1}}"#)
}

async fn shipments(prefix: &str, order: &str) -> u64 {
    let mut redis = idem_tests::redis_connection(&redis_url()).await;
    let count: Option<u64> = redis::cmd("GET")
        .arg(format!("{prefix}shipments:{order}"))
        .query_async(&mut redis)
        .await
        .expect("GET");
    count.unwrap_or(0)
}

/// Waits until `ok` holds, checking every 100 ms; panics after `PATIENCE`.
async fn until<F: AsyncFnMut() -> bool>(what: &str, mut ok: F) {
    let deadline = Instant::now() + PATIENCE;
    while !ok().await {
        assert!(Instant::now() < deadline, "{what} within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The same order published three times ships once, and once more resent
/// by the shop with a new `sent_at` it is still answered from the record;
/// the same order id with another payload is dead-lettered, never run.
async fn duplicates_ship_once_and_a_reused_id_is_dead_lettered<B: Broker>(broker: B) {
    let prefix = unique_prefix("orders-dup");
    let worker = Worker::start(B::EXAMPLE, &env(&broker, &prefix, &[]));
    for _ in 0..3 {
        broker.publish(&order("o-1", "tea")).await;
    }
    until("the three copies settled", async || {
        shipments(&prefix, "o-1").await == 1 && broker.outstanding().await == 0
    })
    .await;
    let resent = r#"{"order_id":"o-1","sku":"tea","qty":1,"sent_at":"2026-12-05T10:05:00Z"}"#;
    broker.publish(resent).await;
    until("the resent order settled", async || {
        broker.outstanding().await == 0
    })
    .await;
    assert!(
        broker.dead_letters().await.is_empty(),
        "a resend with a new sent_at is not a reused key"
    );
    assert_eq!(shipments(&prefix, "o-1").await, 1);
    broker.publish(&order("o-1", "coffee")).await;
    until("the reused id dead-lettered", async || {
        broker.dead_letters().await.len() == 1 && broker.outstanding().await == 0
    })
    .await;
    let dead = broker.dead_letters().await;
    assert!(dead[0].payload.contains("coffee"), "{dead:?}");
    assert!(
        dead[0].reason.contains("used before for another payload"),
        "{dead:?}"
    );
    assert_eq!(shipments(&prefix, "o-1").await, 1);
    assert_eq!(
        worker.count("shipping o-1"),
        1,
        "the copies were answered from the record"
    );
}

/// A consumer killed while it ships: the order is delivered again, to
/// another consumer, and ships once.
async fn a_consumer_killed_mid_order_ships_it_once<B: Broker>(broker: B) {
    let prefix = unique_prefix("orders-kill");
    let mut first = Worker::start(
        B::EXAMPLE,
        &env(
            &broker,
            &prefix,
            &[("SHIP_DELAY_MS", "2000"), ("LEASE_MS", "1500")],
        ),
    );
    broker.publish(&order("o-2", "tea")).await;
    first.wait_for("shipping o-2", PATIENCE);
    first.kill();
    let second = Worker::start(B::EXAMPLE, &env(&broker, &prefix, &[("LEASE_MS", "1500")]));
    until("the order shipped and acknowledged", async || {
        shipments(&prefix, "o-2").await >= 1 && broker.outstanding().await == 0
    })
    .await;
    assert_eq!(shipments(&prefix, "o-2").await, 1);
    assert_eq!(second.count("shipped o-2"), 1);
}

/// A consumer frozen (SIGSTOP) while it ships, past its broker's deadline
/// and its claim's lease: another consumer ships the order; the first,
/// resumed, finds its claim taken and ships nothing.
async fn a_consumer_frozen_past_its_lease_ships_nothing_when_it_wakes<B: Broker>(broker: B) {
    let prefix = unique_prefix("orders-freeze");
    let mut first = Worker::start(
        B::EXAMPLE,
        &env(
            &broker,
            &prefix,
            &[("SHIP_DELAY_MS", "1500"), ("LEASE_MS", "600")],
        ),
    );
    broker.publish(&order("o-3", "tea")).await;
    first.wait_for("shipping o-3", PATIENCE);
    first.freeze();
    let second = Worker::start(B::EXAMPLE, &env(&broker, &prefix, &[("LEASE_MS", "600")]));
    second.wait_for("shipped o-3", PATIENCE);
    first.resume();
    // Its handler ends: its commit refused (or, on a consumer without
    // fencing, its shipment made again).
    first.wait_for_any_or_exit(&["fenced o-3", "shipped o-3"], PATIENCE);
    until("nothing outstanding", async || {
        broker.outstanding().await == 0
    })
    .await;
    assert_eq!(shipments(&prefix, "o-3").await, 1);
    assert_eq!(first.count("shipped o-3"), 0);
}

/// A message that always fails transiently is delivered again with
/// backoff, then dead-lettered with its last error after the cap; the
/// consumer keeps shipping other orders meanwhile.
async fn a_poison_message_is_dead_lettered_after_its_cap<B: Broker>(broker: B) {
    let prefix = unique_prefix("orders-poison");
    let worker = Worker::start(
        B::EXAMPLE,
        &env(&broker, &prefix, &[("MAX_DELIVERIES", "3")]),
    );
    let started = Instant::now();
    broker.publish(&order("o-4", "carrier-down")).await;
    broker.publish(&order("o-5", "tea")).await;
    until(
        "the poison dead-lettered and the other shipped",
        async || {
            broker.dead_letters().await.len() == 1
                && shipments(&prefix, "o-5").await == 1
                && broker.outstanding().await == 0
        },
    )
    .await;
    let dead = broker.dead_letters().await;
    assert!(dead[0].payload.contains("o-4"), "{dead:?}");
    assert!(
        dead[0].reason.contains("failed on each of 3 deliveries")
            && dead[0].reason.contains("carrier is unavailable"),
        "{dead:?}"
    );
    assert_eq!(
        worker.count("shipping o-4"),
        3,
        "delivered exactly up to the cap"
    );
    // Backoff between deliveries: 200 ms, then 400 ms, never at once.
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(shipments(&prefix, "o-4").await, 0);
}

macro_rules! on_each_broker {
    ($story:ident) => {
        mod $story {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_rabbitmq() {
                super::$story(RabbitMq::new().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_jetstream() {
                super::$story(JetStream::new().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_redis_streams() {
                super::$story(RedisStream::new()).await;
            }
        }
    };
}

on_each_broker!(duplicates_ship_once_and_a_reused_id_is_dead_lettered);
on_each_broker!(a_consumer_killed_mid_order_ships_it_once);
on_each_broker!(a_consumer_frozen_past_its_lease_ships_nothing_when_it_wakes);
on_each_broker!(a_poison_message_is_dead_lettered_after_its_cap);
