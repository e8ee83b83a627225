//! The order examples on real brokers (RabbitMQ, NATS JetStream, Redis
//! Streams), as separate processes: duplicates, a consumer killed mid-order,
//! a consumer frozen past its lease whose message another consumer took
//! over, a poison message. Each order's shipments are counted in Redis,
//! where the handler commits them with idem's record (and, for the kill and
//! the freeze, in PostgreSQL, with the records there); each story waits for
//! the broker to have nothing outstanding, then counts.

use std::time::{Duration, Instant};

use idem_examples::shipments::Shipments;
use idem_tests::brokers::{order_shipments, Broker, JetStream, RabbitMq, RedisStream, PATIENCE};
use idem_tests::sqs_queue::SqsQueue;
use idem_tests::{database_url, redis_url, unique_prefix, unique_schema, Worker};
use sqlx::AssertSqlSafe;

/// Where a story's shipments and records are: Redis under a key prefix,
/// or PostgreSQL in a schema, each the story's own.
enum Ledger {
    Redis(String),
    Postgres(String),
}

impl Ledger {
    fn redis(story: &str) -> Self {
        Self::Redis(unique_prefix(story))
    }

    fn postgres() -> Self {
        Self::Postgres(unique_schema())
    }

    /// The shipments of `order`.
    async fn shipments(&self, order: &str) -> u64 {
        match self {
            Self::Redis(prefix) => order_shipments(prefix, order).await,
            Self::Postgres(schema) => {
                let pool = idem_tests::pg_pool(1).await;
                let table = Shipments::postgres_table(schema);
                let count: Option<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
                    "SELECT shipped FROM {table} WHERE order_id = $1"
                )))
                .bind(order)
                .fetch_optional(&pool)
                .await
                .expect("shipments");
                count.map_or(0, |n| u64::try_from(n).expect("a count"))
            }
        }
    }
}

/// A story's worker settings: the broker's, the ledger's (Redis and the
/// key prefix, or PostgreSQL and the schema).
fn env<B: Broker>(
    broker: &B,
    ledger: &Ledger,
    extra: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut env = broker.env(1000);
    env.push(("REDIS_URL", redis_url()));
    match ledger {
        Ledger::Redis(prefix) => env.push(("PREFIX", prefix.clone())),
        Ledger::Postgres(schema) => {
            env.push(("DATABASE_URL", database_url()));
            env.push(("PG_SCHEMA", schema.clone()));
        }
    }
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    env
}

fn order(id: &str, sku: &str) -> String {
    format!(r#"{{"order_id":"{id}","sku":"{sku}","qty":1}}"#)
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
    let worker = Worker::start(
        B::EXAMPLE,
        &env(&broker, &Ledger::Redis(prefix.clone()), &[]),
    );
    for _ in 0..3 {
        broker.publish(&order("o-1", "tea")).await;
    }
    until("the three copies settled", async || {
        order_shipments(&prefix, "o-1").await == 1 && broker.outstanding().await == 0
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
    assert_eq!(order_shipments(&prefix, "o-1").await, 1);
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
    assert_eq!(order_shipments(&prefix, "o-1").await, 1);
    assert_eq!(
        worker.count("shipping o-1"),
        1,
        "the copies were answered from the record"
    );
}

/// A consumer killed while it ships: the order is delivered again, to
/// another consumer, and ships once.
async fn a_consumer_killed_mid_order_ships_it_once<B: Broker>(broker: B, ledger: Ledger) {
    let mut first = Worker::start(
        B::EXAMPLE,
        &env(
            &broker,
            &ledger,
            &[("SHIP_DELAY_MS", "2000"), ("LEASE_MS", "1500")],
        ),
    );
    broker.publish(&order("o-2", "tea")).await;
    first.wait_for("shipping o-2", PATIENCE);
    first.kill();
    let second = Worker::start(B::EXAMPLE, &env(&broker, &ledger, &[("LEASE_MS", "1500")]));
    until("the order shipped and acknowledged", async || {
        ledger.shipments("o-2").await >= 1 && broker.outstanding().await == 0
    })
    .await;
    assert_eq!(ledger.shipments("o-2").await, 1);
    assert_eq!(second.count("shipped o-2"), 1);
}

/// A consumer frozen (SIGSTOP) while it ships, past its broker's deadline
/// and its claim's lease: another consumer ships the order; the first,
/// resumed, finds its claim taken and ships nothing.
async fn a_consumer_frozen_past_its_lease_ships_nothing_when_it_wakes<B: Broker>(
    broker: B,
    ledger: Ledger,
) {
    let mut first = Worker::start(
        B::EXAMPLE,
        &env(
            &broker,
            &ledger,
            &[("SHIP_DELAY_MS", "1500"), ("LEASE_MS", "600")],
        ),
    );
    broker.publish(&order("o-3", "tea")).await;
    first.wait_for("shipping o-3", PATIENCE);
    first.freeze();
    let second = Worker::start(B::EXAMPLE, &env(&broker, &ledger, &[("LEASE_MS", "600")]));
    second.wait_for("shipped o-3", PATIENCE);
    first.resume();
    // Its handler ends: its commit refused (or, on a consumer without
    // fencing, its shipment made again).
    first.wait_for_any_or_exit(&["fenced o-3", "shipped o-3"], PATIENCE);
    until("nothing outstanding", async || {
        broker.outstanding().await == 0
    })
    .await;
    assert_eq!(ledger.shipments("o-3").await, 1);
    assert_eq!(first.count("shipped o-3"), 0);
}

/// A message that always fails transiently is delivered again with
/// backoff, then dead-lettered with its last error after the cap; the
/// consumer keeps shipping other orders meanwhile.
async fn a_poison_message_is_dead_lettered_after_its_cap<B: Broker>(broker: B) {
    let prefix = unique_prefix("orders-poison");
    let worker = Worker::start(
        B::EXAMPLE,
        &env(
            &broker,
            &Ledger::Redis(prefix.clone()),
            &[("MAX_DELIVERIES", "3")],
        ),
    );
    let started = Instant::now();
    broker.publish(&order("o-4", "carrier-down")).await;
    broker.publish(&order("o-5", "tea")).await;
    until(
        "the poison dead-lettered and the other shipped",
        async || {
            broker.dead_letters().await.len() == 1
                && order_shipments(&prefix, "o-5").await == 1
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
    assert_eq!(order_shipments(&prefix, "o-4").await, 0);
}

/// A story on each broker; with a ledger (`redis` or `postgres`), the
/// story takes it as its second argument.
macro_rules! on_each_broker {
    ($story:ident $(, $ledger:ident)?) => {
        on_each_broker!(@mod $story, $story $(, $ledger)?);
    };
    ($name:ident = $story:ident, $ledger:ident) => {
        on_each_broker!(@mod $name, $story, $ledger);
    };
    (@mod $name:ident, $story:ident $(, $ledger:ident)?) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_rabbitmq() {
                super::$story(RabbitMq::new().await $(, on_each_broker!(@ledger $ledger, $name))?).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_jetstream() {
                super::$story(JetStream::new().await $(, on_each_broker!(@ledger $ledger, $name))?).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_redis_streams() {
                super::$story(RedisStream::new() $(, on_each_broker!(@ledger $ledger, $name))?).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_sqs() {
                super::$story(SqsQueue::new().await $(, on_each_broker!(@ledger $ledger, $name))?).await;
            }
        }
    };
    (@ledger redis, $name:ident) => {
        Ledger::redis(stringify!($name))
    };
    (@ledger postgres, $name:ident) => {
        Ledger::postgres()
    };
}

on_each_broker!(duplicates_ship_once_and_a_reused_id_is_dead_lettered);
on_each_broker!(a_consumer_killed_mid_order_ships_it_once, redis);
on_each_broker!(
    a_consumer_frozen_past_its_lease_ships_nothing_when_it_wakes,
    redis
);
on_each_broker!(a_poison_message_is_dead_lettered_after_its_cap);
on_each_broker!(
    on_postgres_a_consumer_killed_mid_order_ships_it_once =
        a_consumer_killed_mid_order_ships_it_once,
    postgres
);
on_each_broker!(
    on_postgres_a_consumer_frozen_past_its_lease_ships_nothing_when_it_wakes =
        a_consumer_frozen_past_its_lease_ships_nothing_when_it_wakes,
    postgres
);
