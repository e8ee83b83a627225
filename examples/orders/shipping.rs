//! The order pipeline's handler, shared by the three broker examples
//! (`orders_rabbitmq`, `orders_nats`, `orders_redis_streams`) and their
//! tests: ship an order once, however often its message is delivered.
//!
//! The effect (the order's shipment count, in Redis) is committed with
//! idem's record in one step that checks the claim ([`Claim::commit`](idem_core::Claim::commit)): a
//! consumer frozen past its lease, whose message another consumer took
//! over, ships nothing when it wakes. Each step is printed on stdout
//! (`shipping <order>`, `shipped <order>`, `fenced <order>`) for the tests
//! that kill and freeze workers.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_core::{encode_result, Claim, CommitError, Failure};
use idem_redis::RedisStore;
use serde::{Deserialize, Serialize};

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
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        matches!(self, Self::OutOfStock(_))
    }
}

/// Ships orders, counting shipments per order in Redis.
#[derive(Clone)]
pub struct Shipping {
    store: RedisStore,
    prefix: String,
    delay: Duration,
    /// The `carrier-flaky` orders this process tried once already.
    tried: Arc<Mutex<HashSet<String>>>,
}

impl Shipping {
    /// Shipments counted under `prefix` in `store`'s Redis; each shipment
    /// takes `delay` (a slow carrier).
    pub fn new(store: RedisStore, prefix: &str, delay: Duration) -> Self {
        Self {
            store,
            prefix: prefix.to_owned(),
            delay,
            tried: Arc::default(),
        }
    }

    /// The key counting `order_id`'s shipments.
    pub fn shipments_key(prefix: &str, order_id: &str) -> String {
        format!("{prefix}shipments:{order_id}")
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
        let key = Self::shipments_key(&self.prefix, &order.order_id);
        let mut tx = self.store.transaction();
        let shipped = tx
            .get(&key)
            .await
            .map_err(|e| ShipError::NotCommitted(e.to_string()))?
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        tx.set(key, (shipped + 1).to_string());
        let shipment = Shipment {
            shipment_id: format!("shp_{}_{}", order.order_id, claim.fencing_token().0),
            order_id: order.order_id.clone(),
        };
        let outcome = encode_result(&Ok::<_, ShipError>(&shipment))
            .map_err(|e| ShipError::NotCommitted(e.to_string()))?;
        match claim.commit(tx, &outcome).await {
            Ok(()) => {
                println!("shipped {}", order.order_id);
                Ok(shipment)
            }
            Err(CommitError::LeaseLost) => {
                println!("fenced {}", order.order_id);
                Err(ShipError::NotCommitted("the claim was lost".into()))
            }
            Err(e) => Err(ShipError::NotCommitted(e.to_string())),
        }
    }
}

/// The example's settings from the environment: `REDIS_URL` (records and
/// shipments), `PREFIX` (their keys), `SHIP_DELAY_MS`, `LEASE_MS`,
/// `MAX_DELIVERIES`, `DRAIN_MS` (how long running orders get to finish on
/// shutdown), `RECONNECT_MS` (the first pause before connecting again).
pub struct Settings {
    /// Redis for records and shipments.
    pub redis_url: String,
    /// Key prefix.
    pub prefix: String,
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

    /// The consumer: the engine on Redis (keys under the prefix), the
    /// handler, keyed by the payload's `order_id`; `sent_at` does not make
    /// a resent order another order.
    pub async fn consumer(
        &self,
    ) -> Result<idem_queue::Consumer<impl idem_queue::Handler>, Box<dyn std::error::Error>> {
        let store = RedisStore::connect(&self.redis_url)
            .await?
            .with_prefix(&format!("{}idem:", self.prefix));
        let engine = idem_core::Engine::new(store.clone())
            .with_policy(idem_core::Policy::default().lease(self.lease));
        let shipping = Shipping::new(store, &self.prefix, self.delay);
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
