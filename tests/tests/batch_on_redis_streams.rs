//! A batch read from a Redis Stream, through the order example's consumer
//! (`orders_redis_streams` reads 16 entries at a time and runs them as one
//! batch): ten orders, those at positions 1 and 3 failing (their carrier is
//! down); exactly those two stay pending, to be delivered again, and the
//! other eight ship and are acknowledged. An order published twice and read
//! in one batch ships once, and both of its entries are acknowledged at once.

use std::time::{Duration, Instant};

use idem_tests::brokers::{Broker, RedisStream, PATIENCE};
use idem_tests::{redis_url, unique_prefix, Worker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_failures_at_positions_1_and_3_of_10_leaves_exactly_those_pending() {
    let broker = RedisStream::new();
    let prefix = unique_prefix("orders-batch");
    // Published before the consumer starts, so that it reads all ten at once.
    for i in 0..10 {
        let sku = if i == 1 || i == 3 {
            "carrier-down"
        } else {
            "tea"
        };
        broker
            .publish(&format!(r#"{{"order_id":"b-{i}","sku":"{sku}","qty":1}}"#))
            .await;
    }
    let mut env = broker.env(60_000);
    env.push(("REDIS_URL", redis_url()));
    env.push(("PREFIX", prefix.clone()));
    env.push(("MAX_DELIVERIES", "100".to_owned()));
    let worker = Worker::start(RedisStream::EXAMPLE, &env);
    let deadline = Instant::now() + PATIENCE;
    while worker.count("shipped b-") < 8 || broker.outstanding().await != 2 {
        assert!(
            Instant::now() < deadline,
            "eight shipped and two pending within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pending = broker.pending_payloads();
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert!(pending.iter().any(|p| p.contains("\"b-1\"")), "{pending:?}");
    assert!(pending.iter().any(|p| p.contains("\"b-3\"")), "{pending:?}");
    for i in [0, 2, 4, 5, 6, 7, 8, 9] {
        assert_eq!(worker.count(&format!("shipped b-{i}")), 1, "b-{i}");
    }
    // The two are delivered again (and fail again: their carrier is down).
    worker.wait_for("shipping b-1", PATIENCE);
    let deadline = Instant::now() + PATIENCE;
    while worker.count("shipping b-1") < 2 || worker.count("shipping b-3") < 2 {
        assert!(
            Instant::now() < deadline,
            "b-1 and b-3 delivered again within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(worker.count("shipped b-1") + worker.count("shipped b-3"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_published_twice_and_read_in_one_batch_ships_once_and_both_are_acknowledged() {
    let broker = RedisStream::new();
    let prefix = unique_prefix("orders-batch-twice");
    // A producer that published an order twice, read in one batch with
    // another order between them.
    for (id, sku) in [("twice", "tea"), ("once", "cocoa"), ("twice", "tea")] {
        broker
            .publish(&format!(r#"{{"order_id":"{id}","sku":"{sku}","qty":1}}"#))
            .await;
    }
    // Redelivery only a minute later: the duplicate must be settled in this
    // batch, from the first one's record, not left to come back.
    let mut env = broker.env(60_000);
    env.push(("REDIS_URL", redis_url()));
    env.push(("PREFIX", prefix.clone()));
    let worker = Worker::start(RedisStream::EXAMPLE, &env);
    let deadline = Instant::now() + PATIENCE;
    while worker.count("shipped twice") < 1
        || worker.count("shipped once") < 1
        || broker.outstanding().await != 0
    {
        assert!(
            Instant::now() < deadline,
            "both orders shipped and all three entries acknowledged within {PATIENCE:?}; pending: {:?}",
            broker.pending_payloads()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(worker.count("shipping twice"), 1, "the order ran once");
    assert_eq!(worker.count("shipped twice"), 1);
    assert_eq!(worker.count("shipping once"), 1);
}
