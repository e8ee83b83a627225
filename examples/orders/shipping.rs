//! The order pipeline's handler, shared by the four broker examples
//! (`orders_rabbitmq`, `orders_nats`, `orders_redis_streams`, `orders_sqs`) and their
//! tests: ship an order once, however often its message is delivered.
//!
//! The effect (the order's shipment count, in Redis or PostgreSQL:
//! [`Shipments`](crate::shipments::Shipments)) is committed with idem's record in one step that checks
//! the claim ([`commit_with_record`](idem_queue::commit_with_record)): a
//! consumer frozen past its lease, whose message another consumer took
//! over, ships nothing when it wakes. Each step is printed on stdout
//! (`shipping <order>`, `shipped <order>`, `fenced <order>`) for the tests
//! that kill and freeze workers.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_core::{Claim, CommitError, Failure};
use serde::{Deserialize, Serialize};

use crate::shipments::Shipments;

/// The message: an order was placed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct OrderPlaced {
    /// The order's id; the message's idempotency key.
    pub order_id: String,
    /// What to ship. `carrier-down` is never accepted by the carrier (a
    /// transient failure every time); `carrier-flaky` is refused the first
    /// time this process ships its order (a transient failure once);
    /// `out-of-stock` fails for good.
    pub sku: String,
    /// How many.
    pub qty: u32,
    /// When the shop sent the message: a resend carries a new one, and is
    /// still the same order (left out of the fingerprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
}

/// The handler's result, recorded and replayed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shipment {
    /// The shipment's id (the claim's fencing token in it).
    pub shipment_id: String,
    /// The order shipped.
    pub order_id: String,
}

/// Why an order was not shipped.
#[derive(Debug, Serialize, Deserialize, thiserror::Error)]
pub enum ShipError {
    /// The carrier refused for now (transient: delivered again later).
    #[error("the carrier is unavailable")]
    CarrierDown,
    /// Nothing to ship (final: recorded, the message acknowledged).
    #[error("{0} is out of stock")]
    OutOfStock(String),
    /// The shipment could not be committed (transient).
    #[error("the shipment was not committed: {0}")]
    NotCommitted(String),
    /// The claim was lost while shipping (another consumer took the order
    /// over): nothing was committed.
    #[error("the claim was lost: another consumer ships this order")]
    Fenced,
}

impl From<CommitError> for ShipError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LeaseLost => Self::Fenced,
            other => Self::NotCommitted(other.to_string()),
        }
    }
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        matches!(self, Self::OutOfStock(_))
    }
}

/// Ships orders, counting shipments per order in [`Shipments`].
#[derive(Clone)]
pub struct Shipping {
    shipments: Shipments,
    delay: Duration,
    /// The `carrier-flaky` orders this process tried once already.
    tried: Arc<Mutex<HashSet<String>>>,
}

impl Shipping {
    /// Shipments counted in `shipments`; each takes `delay` (a slow
    /// carrier).
    pub fn new(shipments: Shipments, delay: Duration) -> Self {
        Self {
            shipments,
            delay,
            tried: Arc::default(),
        }
    }

    /// Ships `order` under `claim`.
    pub async fn ship(&self, order: OrderPlaced, claim: Claim) -> Result<Shipment, ShipError> {
        println!("shipping {}", order.order_id);
        tokio::time::sleep(self.delay).await;
        match order.sku.as_str() {
            "carrier-down" => return Err(ShipError::CarrierDown),
            "carrier-flaky" => {
                let mut tried = self.tried.lock().unwrap_or_else(PoisonError::into_inner);
                if tried.insert(order.order_id.clone()) {
                    return Err(ShipError::CarrierDown);
                }
            }
            "out-of-stock" => return Err(ShipError::OutOfStock(order.sku)),
            _ => {}
        }
        let shipment = Shipment {
            shipment_id: format!("shp_{}_{}", order.order_id, claim.fencing_token().0),
            order_id: order.order_id.clone(),
        };
        let shipped = self.shipments.ship(&claim, shipment).await;
        match &shipped {
            Ok(_) => println!("shipped {}", order.order_id),
            Err(ShipError::Fenced) => println!("fenced {}", order.order_id),
            Err(_) => {}
        }
        shipped
    }
}

/// The example's settings from the environment: `REDIS_URL` (records and
/// shipments), `PREFIX` (their keys), or `DATABASE_URL` (records and
/// shipments in PostgreSQL instead) and `PG_SCHEMA` (default `orders`);
/// `SHIP_DELAY_MS`, `LEASE_MS`,
/// `MAX_DELIVERIES`, `DRAIN_MS` (how long running orders get to finish on
/// shutdown), `RECONNECT_MS` (the first pause before connecting again).
pub struct Settings {
    /// Redis for records and shipments.
    pub redis_url: String,
    /// Key prefix.
    pub prefix: String,
    /// PostgreSQL for records and shipments, in place of Redis.
    pub database_url: Option<String>,
    /// The PostgreSQL schema.
    pub pg_schema: String,
    /// How long a shipment takes.
    pub delay: Duration,
    /// The claim's lease.
    pub lease: Duration,
    /// Deliveries before a failing message is dead-lettered.
    pub max_deliveries: u32,
    /// How long running orders get to finish on shutdown.
    pub drain: Duration,
    /// The first pause before connecting again to a lost broker.
    pub reconnect: Duration,
}

impl Settings {
    /// Reads the environment, with defaults for a local run.
    pub fn from_env() -> Self {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        let ms = |name: &str, default: u64| {
            Duration::from_millis(var(name, "").parse().unwrap_or(default))
        };
        Self {
            redis_url: var("REDIS_URL", "redis://127.0.0.1:6379"),
            prefix: var("PREFIX", "orders:"),
            database_url: std::env::var("DATABASE_URL").ok(),
            pg_schema: var("PG_SCHEMA", "orders"),
            delay: ms("SHIP_DELAY_MS", 0),
            lease: ms("LEASE_MS", 10_000),
            max_deliveries: var("MAX_DELIVERIES", "")
                .parse()
                .unwrap_or(idem_queue::DEFAULT_MAX_DELIVERIES),
            drain: ms("DRAIN_MS", 30_000),
            reconnect: ms("RECONNECT_MS", 1_000),
        }
    }

    /// How the consumer runs: until SIGTERM or Ctrl-C (printing `stopping`
    /// when asked), draining and reconnecting as set.
    pub fn running(&self) -> idem_queue::Running {
        let shutdown = idem_queue::shutdown_on_signals();
        let asked = shutdown.clone();
        tokio::spawn(async move {
            asked.cancelled().await;
            println!("stopping");
        });
        idem_queue::Running::default()
            .until(shutdown)
            .drain(self.drain)
            .reconnect(idem_queue::Backoff {
                first: self.reconnect,
                max: std::time::Duration::from_secs(30).max(self.reconnect),
            })
    }

    /// The shipments: in PostgreSQL if `DATABASE_URL` is set, else in Redis.
    ///
    /// # Errors
    ///
    /// The store did not answer.
    pub async fn shipments(&self) -> Result<Shipments, Box<dyn std::error::Error>> {
        match &self.database_url {
            Some(url) => Shipments::postgres(url, &self.pg_schema).await,
            None => Shipments::redis(&self.redis_url, &self.prefix).await,
        }
    }

    /// The consumer: the engine on the shipments' store, the handler, keyed
    /// by the payload's `order_id`; `sent_at` does not make a resent order
    /// another order.
    pub async fn consumer(
        &self,
    ) -> Result<idem_queue::Consumer<impl idem_queue::Handler>, Box<dyn std::error::Error>> {
        let shipments = self.shipments().await?;
        let engine = shipments
            .engine()
            .with_policy(idem_core::Policy::default().lease(self.lease));
        let shipping = Shipping::new(shipments, self.delay);
        let handler = idem_queue::handler_fn(move |order: OrderPlaced, claim: Claim| {
            let shipping = shipping.clone();
            async move { shipping.ship(order, claim).await }
        });
        Ok(idem_queue::Consumer::new(engine, "ship-order", handler)
            .key(idem_queue::KeySource::Field("/order_id".into()))
            .ignore_fields(idem_core::IgnoredFields::new(["/sent_at"])?)
            .max_deliveries(self.max_deliveries))
    }
}
