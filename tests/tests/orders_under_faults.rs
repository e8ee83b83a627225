//! The order examples under load while something fails: the broker
//! restarted, or the store (the Redis that keeps idem's records and the
//! shipments) down for a few seconds. A hundred orders, each published
//! twice, two consumer processes; the fault strikes once thirty have
//! shipped. Afterwards every order has shipped exactly once, and nothing
//! is outstanding or dead-lettered: nothing was acknowledged without its
//! record, nothing was lost, nothing ran twice.

use std::time::{Duration, Instant};

use idem_tests::brokers::{Broker, JetStream, RabbitMq, RedisStream, PATIENCE};
use idem_tests::sqs_queue::SqsQueue;
use idem_tests::{unique_prefix, PrivateRedis, Worker};

const ORDERS: usize = 100;

fn order(i: usize) -> String {
    format!(r#"{{"order_id":"load-{i}","sku":"tea","qty":1}}"#)
}

/// Each order's shipments, from the Redis on `port`; `None` if it is down.
fn shipments(port: u16, prefix: &str) -> Option<Vec<u64>> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    let keys: Vec<String> = (0..ORDERS)
        .map(|i| format!("{prefix}shipments:load-{i}"))
        .collect();
    let counts: Vec<Option<u64>> = redis::cmd("MGET").arg(&keys).query(&mut c).ok()?;
    Some(counts.into_iter().map(Option::unwrap_or_default).collect())
}

/// What strikes mid-load.
enum Fault {
    /// The broker restarts.
    Broker,
    /// The store is killed, and started again three seconds later.
    Store,
}

async fn a_hundred_orders_ship_once_through_a_fault<B: Broker>(mut broker: B, fault: Fault) {
    let mut store = PrivateRedis::start(true);
    let prefix = unique_prefix("orders-load");
    let mut env = broker.env(1000);
    env.push(("REDIS_URL", store.url()));
    env.push(("PREFIX", prefix.clone()));
    env.push(("SHIP_DELAY_MS", "200".to_owned()));
    env.push(("LEASE_MS", "2000".to_owned()));
    let workers = [
        Worker::start(B::EXAMPLE, &env),
        Worker::start(B::EXAMPLE, &env),
    ];
    for i in 0..ORDERS {
        broker.publish(&order(i)).await;
        broker.publish(&order(i)).await;
    }
    let deadline = Instant::now() + PATIENCE;
    let shipped = loop {
        let shipped =
            shipments(store.port(), &prefix).map_or(0, |s| s.iter().filter(|n| **n > 0).count());
        if shipped >= 30 {
            break shipped;
        }
        assert!(
            Instant::now() < deadline,
            "30 orders shipped within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        shipped < ORDERS,
        "the fault strikes mid-load: {shipped} of {ORDERS} shipped"
    );
    match fault {
        Fault::Broker => broker.restart().await,
        Fault::Store => {
            store.kill();
            // The outage's length, not a wait for a state.
            tokio::time::sleep(Duration::from_secs(3)).await;
            store.restart();
        }
    }
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let all = shipments(store.port(), &prefix).is_some_and(|s| s.iter().all(|n| *n > 0));
        if all && broker.outstanding().await == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "every order shipped and acknowledged within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let counts = shipments(store.port(), &prefix).expect("the store is up");
    let doubled: Vec<usize> = (0..ORDERS).filter(|i| counts[*i] > 1).collect();
    assert!(doubled.is_empty(), "shipped twice: {doubled:?}");
    assert!(
        broker.dead_letters().await.is_empty(),
        "nothing dead-lettered"
    );
    drop(workers);
}

/// An order placed while the store is down, with a dead-letter cap of 2
/// and a carrier that refuses it once after the outage: it ships once and
/// is not dead-lettered. The outage holds its delivery rather than
/// redelivering it, so it does not spend the cap.
async fn an_order_placed_while_the_store_is_down_ships_once_after_it<B: Broker>(broker: B) {
    let mut store = PrivateRedis::start(true);
    let prefix = unique_prefix("orders-outage");
    let mut env = broker.env(1000);
    env.push(("REDIS_URL", store.url()));
    env.push(("PREFIX", prefix.clone()));
    env.push(("LEASE_MS", "2000".to_owned()));
    env.push(("MAX_DELIVERIES", "2".to_owned()));
    let worker = Worker::start(B::EXAMPLE, &env);
    store.kill();
    broker
        .publish(r#"{"order_id":"outage-1","sku":"carrier-flaky","qty":1}"#)
        .await;
    // The outage's length, not a wait for a state.
    tokio::time::sleep(Duration::from_secs(3)).await;
    store.restart();
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let shipped = worker.count("shipped outage-1") > 0;
        let dead = !broker.dead_letters().await.is_empty();
        assert!(
            !dead,
            "dead-lettered after a store outage: {:?}",
            broker.dead_letters().await
        );
        if shipped && broker.outstanding().await == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the order shipped and was acknowledged within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(worker.count("shipped outage-1"), 1, "shipped once");
    drop(worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq_an_order_placed_while_the_store_is_down_ships_once_after_it() {
    an_order_placed_while_the_store_is_down_ships_once_after_it(RabbitMq::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_jetstream_an_order_placed_while_the_store_is_down_ships_once_after_it() {
    an_order_placed_while_the_store_is_down_ships_once_after_it(JetStream::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_streams_an_order_placed_while_the_store_is_down_ships_once_after_it() {
    an_order_placed_while_the_store_is_down_ships_once_after_it(RedisStream::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqs_an_order_placed_while_the_store_is_down_ships_once_after_it() {
    an_order_placed_while_the_store_is_down_ships_once_after_it(SqsQueue::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqs_a_store_down_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(SqsQueue::new().await, Fault::Store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq_a_broker_restart_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(RabbitMq::new().await, Fault::Broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_jetstream_a_broker_restart_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(JetStream::private().await, Fault::Broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_streams_a_broker_restart_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(RedisStream::private(), Fault::Broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq_a_store_down_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(RabbitMq::new().await, Fault::Store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_jetstream_a_store_down_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(JetStream::new().await, Fault::Store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_streams_a_store_down_mid_load_loses_nothing_and_doubles_nothing() {
    a_hundred_orders_ship_once_through_a_fault(RedisStream::new(), Fault::Store).await;
}
