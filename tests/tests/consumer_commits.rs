//! A consumer that commits its effect with its record in one call
//! (`idem_queue::commit_with_record`): on PostgreSQL and SQLite (the
//! shipment row and the record in one transaction), on DynamoDB (one
//! `TransactWriteItems`) and on Redis (one script call), an order
//! delivered eight times at once and again later ships once, every copy is
//! acknowledged or left for later, and the later one is answered from the
//! record.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_core::{Claim, CommitError, Engine, Failure};
use idem_queue::{
    commit_with_record, handler_fn, Action, Consumer, Handled, Handler, KeySource, Message, Verdict,
};
use idem_tests::Told;
use serde::{Deserialize, Serialize};
use sqlx::AssertSqlSafe;

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    order_id: String,
}

#[derive(Debug, Serialize, Deserialize, thiserror::Error)]
enum ShipError {
    #[error("the shipment was not written: {0}")]
    Database(String),
    #[error("the shipment was not committed: {0}")]
    NotCommitted(String),
}

impl From<CommitError> for ShipError {
    fn from(e: CommitError) -> Self {
        Self::NotCommitted(e.to_string())
    }
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        false
    }
}

/// Eight copies of one order at once, then one more: the verdicts.
async fn eight_copies_then_one<H: Handler>(consumer: Consumer<H>) -> Vec<Verdict> {
    let consumer = Arc::new(consumer);
    let told = Arc::new(Mutex::new(Vec::new()));
    let copy = |n: u32| Told {
        message: Message::new(r#"{"order_id":"o-1"}"#).delivered(n),
        told: Arc::clone(&told),
    };
    let copies: Vec<_> = (0..8)
        .map(|_| {
            let (consumer, copy) = (Arc::clone(&consumer), copy(1));
            tokio::spawn(async move { consumer.handle(copy).await })
        })
        .collect();
    for done in copies {
        done.await.expect("task").expect("told");
    }
    consumer.handle(copy(2)).await.expect("told");
    let verdicts = told.lock().unwrap_or_else(PoisonError::into_inner).clone();
    verdicts
}

fn assert_shipped_once(verdicts: &[Verdict]) {
    let executed = verdicts
        .iter()
        .filter(|v| v.handled == Handled::Executed)
        .count();
    assert_eq!(executed, 1, "{verdicts:?}");
    for verdict in verdicts {
        assert!(
            matches!(
                verdict.handled,
                Handled::Executed | Handled::Replayed | Handled::InFlight
            ),
            "{verdict:?}"
        );
        assert!(
            !matches!(verdict.action, Action::DeadLetter { .. }),
            "{verdict:?}"
        );
    }
    let last = verdicts.last().expect("the later copy");
    assert_eq!(last.handled, Handled::Replayed, "answered from the record");
    assert_eq!(last.action, Action::Ack);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_an_order_delivered_nine_times_ships_once_with_its_record() {
    let store = idem_tests::pg_store().await;
    let table = format!("\"{}\".shipments", store.schema());
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {table} (order_id text NOT NULL)"
    )))
    .execute(store.pool())
    .await
    .expect("shipments");
    let engine = Engine::new(store.clone());
    let insert = format!("INSERT INTO {table} (order_id) VALUES ($1)");
    let pg = store.clone();
    let ship = handler_fn(move |order: Order, claim: Claim| {
        let (store, insert) = (pg.clone(), insert.clone());
        async move {
            let mut tx = store
                .begin_transaction()
                .await
                .map_err(|e| ShipError::Database(e.to_string()))?;
            sqlx::query(AssertSqlSafe(insert))
                .bind(&order.order_id)
                .execute(&mut *tx)
                .await
                .map_err(|e| ShipError::Database(e.to_string()))?;
            commit_with_record::<_, ShipError, _>(&claim, tx, format!("shipped {}", order.order_id))
                .await
        }
    });
    let consumer =
        Consumer::new(engine, "ship-order", ship).key(KeySource::Field("/order_id".into()));
    let verdicts = eight_copies_then_one(consumer).await;
    assert_shipped_once(&verdicts);
    let rows: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(rows, 1, "one shipment row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_an_order_delivered_nine_times_ships_once_with_its_record() {
    let store = idem_tests::sqlite_store().await;
    sqlx::query("CREATE TABLE shipments (order_id TEXT NOT NULL)")
        .execute(store.pool())
        .await
        .expect("shipments");
    let engine = Engine::new(store.clone());
    let sqlite = store.clone();
    let ship = handler_fn(move |order: Order, claim: Claim| {
        let store = sqlite.clone();
        async move {
            let mut tx = store
                .begin_transaction()
                .await
                .map_err(|e| ShipError::Database(e.to_string()))?;
            sqlx::query("INSERT INTO shipments (order_id) VALUES (?)")
                .bind(&order.order_id)
                .execute(&mut *tx)
                .await
                .map_err(|e| ShipError::Database(e.to_string()))?;
            commit_with_record::<_, ShipError, _>(&claim, tx, format!("shipped {}", order.order_id))
                .await
        }
    });
    let consumer =
        Consumer::new(engine, "ship-order", ship).key(KeySource::Field("/order_id".into()));
    let verdicts = eight_copies_then_one(consumer).await;
    assert_shipped_once(&verdicts);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM shipments")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(rows, 1, "one shipment row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_dynamodb_an_order_delivered_nine_times_ships_once_with_its_record() {
    use idem_dynamodb::aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
    let store = idem_tests::dynamo_store().await;
    // The shipments live in the records' table, beside them, under keys of
    // their own: one transaction writes both.
    let engine = Engine::new(store.clone());
    let dynamo = store.clone();
    let ship = handler_fn(move |order: Order, claim: Claim| {
        let store = dynamo.clone();
        async move {
            let mut tx = store.transaction();
            // Counted, so that a second shipment would show.
            let shipment = Update::builder()
                .table_name(store.table())
                .key(
                    "pk",
                    AttributeValue::B(format!("shipment:{}", order.order_id).into_bytes().into()),
                )
                .update_expression("ADD shipped :one")
                .expression_attribute_values(":one", AttributeValue::N("1".to_owned()))
                .build()
                .map_err(|e| ShipError::Database(e.to_string()))?;
            tx.push(TransactWriteItem::builder().update(shipment).build());
            commit_with_record::<_, ShipError, _>(&claim, tx, format!("shipped {}", order.order_id))
                .await
        }
    });
    let consumer =
        Consumer::new(engine, "ship-order", ship).key(KeySource::Field("/order_id".into()));
    let verdicts = eight_copies_then_one(consumer).await;
    assert_shipped_once(&verdicts);
    let shipped = store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", AttributeValue::B(b"shipment:o-1".to_vec().into()))
        .consistent_read(true)
        .send()
        .await
        .expect("the shipment");
    let count = shipped
        .item()
        .and_then(|item| item.get("shipped"))
        .and_then(|n| n.as_n().ok())
        .cloned();
    assert_eq!(count.as_deref(), Some("1"), "shipped once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_an_order_delivered_nine_times_ships_once_with_its_record() {
    let prefix = idem_tests::unique_prefix("consumer-commit");
    let store = idem_redis::RedisStore::connect(&idem_tests::redis_url())
        .await
        .expect("redis")
        .with_prefix(&prefix);
    let engine = Engine::new(store.clone());
    let key = format!("{prefix}shipments:o-1");
    let (redis, counted) = (store.clone(), key.clone());
    let ship = handler_fn(move |order: Order, claim: Claim| {
        let (store, key) = (redis.clone(), counted.clone());
        async move {
            let mut tx = store.transaction();
            let shipped = tx
                .get(&key)
                .await
                .map_err(|e| ShipError::Database(e.to_string()))?
                .and_then(|v| String::from_utf8(v).ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            tx.set(key, (shipped + 1).to_string());
            commit_with_record::<_, ShipError, _>(&claim, tx, format!("shipped {}", order.order_id))
                .await
        }
    });
    let consumer = Consumer::new(engine, "ship-order", ship)
        .key(KeySource::Field("/order_id".into()))
        .backoff(idem_queue::Backoff {
            first: Duration::from_millis(10),
            max: Duration::from_millis(100),
        });
    let verdicts = eight_copies_then_one(consumer).await;
    assert_shipped_once(&verdicts);
    let shipped: Option<String> = store
        .query(redis::cmd("GET").arg(&key))
        .await
        .expect("count");
    assert_eq!(shipped.as_deref(), Some("1"), "shipped once");
}
