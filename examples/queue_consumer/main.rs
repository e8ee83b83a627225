//! A queue consumer that ships each order exactly once, although the broker
//! delivers messages at least once.
//!
//! An in-process broker delivers 200 `OrderPlaced` messages to four workers.
//! Some messages are delivered twice at the same moment, some again later, some
//! are redelivered after the worker handling them crashed in the middle of
//! processing (a cancelled task, and a process that died holding its claim),
//! and some fail transiently at the carrier and are retried. Every worker
//! handles every delivery through one `idem_core::Engine`.
//!
//! At the end the program prints what happened and checks that each message's
//! effect (a shipment, or a recorded out-of-stock refusal) happened exactly
//! once. It exits with status 1 if any did not.
//!
//! Run it with `cargo run --example queue_consumer`.

use std::collections::{BTreeMap, HashSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_core::{idempotent, Engine, Error, Failure, MemoryStore, Policy};
use serde::{Deserialize, Serialize};

mod broker;
mod streams;

use broker::{Broker, Delivery, Fate};

const MESSAGES: usize = 200;
const WORKERS: usize = 4;

/// The message on the queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct OrderPlaced {
    id: String,
    order: u32,
    sku: String,
    quantity: u32,
}

/// What the handler produces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Shipment {
    order: u32,
    parcel: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
enum ShipError {
    /// A business answer: recorded, replayed to every redelivery.
    #[error("{sku} is out of stock")]
    OutOfStock { sku: String },
    /// The carrier did not answer: the claim is released and a redelivery retries.
    #[error("the carrier did not answer")]
    CarrierDown,
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        matches!(self, ShipError::OutOfStock { .. })
    }
}

/// The warehouse: the side effects that must happen once per message.
#[derive(Default)]
struct Warehouse {
    shipments: Mutex<BTreeMap<String, u32>>,
    refusals: Mutex<BTreeMap<String, u32>>,
}

#[derive(Default)]
struct Counters {
    executed: AtomicUsize,
    replayed: AtomicUsize,
    in_flight: AtomicUsize,
    transient: AtomicUsize,
    cancelled: AtomicUsize,
    killed: AtomicUsize,
    acked: Mutex<HashSet<String>>,
}

/// The consumer: one engine shared by every worker.
struct Consumer {
    engine: Engine,
    warehouse: Arc<Warehouse>,
}

impl Consumer {
    /// Ships one order. The attribute makes the body run at most once per
    /// message id, whatever the broker does, and records the result (or a
    /// final failure) for every redelivery; `fate` only drives the simulation
    /// and stays out of the fingerprint.
    #[idempotent(engine = self.engine, key = msg.id, ttl = "1h", lease = "300ms", skip(fate), claim = claim)]
    async fn handle(&self, msg: &OrderPlaced, fate: Fate) -> Result<Shipment, ShipError> {
        // Talk to the carrier: this is where a crash or an outage hits. For a
        // worker about to be cancelled or killed the call hangs, so that the
        // cut 3ms in always lands mid-call, however slow the machine.
        let carrier_call = match fate {
            Fate::Cancelled | Fate::Killed => Duration::from_secs(5),
            _ => Duration::from_millis(10),
        };
        tokio::time::sleep(carrier_call).await;
        if fate == Fate::CarrierDown {
            return Err(ShipError::CarrierDown);
        }
        if msg.sku == "unobtainium" {
            *self
                .warehouse
                .refusals
                .lock()
                .expect("lock")
                .entry(msg.id.clone())
                .or_default() += 1;
            return Err(ShipError::OutOfStock {
                sku: msg.sku.clone(),
            });
        }
        *self
            .warehouse
            .shipments
            .lock()
            .expect("lock")
            .entry(msg.id.clone())
            .or_default() += 1;
        Ok(Shipment {
            order: msg.order,
            parcel: format!("parcel-{}-{}", msg.order, claim.fencing_token()),
        })
    }
}

/// What the broker should do with a delivery once it was handled.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Disposition {
    /// Acknowledge: the message took effect (now or before).
    Ack,
    /// Leave it unacknowledged: redeliver after this long.
    Redeliver(Duration),
}

/// Handles one delivery, simulating the planned fate, and counts what happened.
async fn process(
    consumer: &Consumer,
    counters: &Counters,
    msg: &OrderPlaced,
    fate: Fate,
) -> Disposition {
    match fate {
        Fate::Cancelled => {
            // The task is cancelled 3ms in, mid-way through the carrier call.
            // The parcel may or may not have been booked: the outcome is
            // unknown, so the engine keeps the claim until its 300ms lease
            // runs out; redeliveries meanwhile find it in flight, and the
            // first after the lease ships it (under a newer fencing token,
            // which a real carrier would use to refuse the older call).
            let handled =
                tokio::time::timeout(Duration::from_millis(3), consumer.handle(msg, fate)).await;
            assert!(handled.is_err(), "the handler takes longer than 3ms");
            counters.cancelled.fetch_add(1, Ordering::SeqCst);
            Disposition::Redeliver(Duration::from_millis(5))
        }
        Fate::Killed => {
            // The process dies 3ms in: nothing runs any more for this
            // delivery, not even the engine's cleanup. The claim stays until
            // its lease runs out, then a redelivery takes it over.
            let mut handling = Box::pin(consumer.handle(msg, fate));
            let handled = tokio::time::timeout(Duration::from_millis(3), &mut handling).await;
            assert!(handled.is_err(), "the handler takes longer than 3ms");
            std::mem::forget(handling);
            counters.killed.fetch_add(1, Ordering::SeqCst);
            Disposition::Redeliver(Duration::from_millis(5))
        }
        fate => {
            let replayed = match consumer.handle(msg, fate).await {
                Ok(ran) => ran.is_replayed(),
                Err(Error::Failed(ran)) if ran.get().is_final() => ran.is_replayed(),
                Err(Error::Failed(_)) => {
                    counters.transient.fetch_add(1, Ordering::SeqCst);
                    return Disposition::Redeliver(Duration::from_millis(5));
                }
                Err(Error::InFlight { retry_after }) => {
                    counters.in_flight.fetch_add(1, Ordering::SeqCst);
                    return Disposition::Redeliver(
                        retry_after.clamp(Duration::from_millis(5), Duration::from_millis(100)),
                    );
                }
                Err(e) => panic!("message {} could not be handled: {e}", msg.id),
            };
            let counter = if replayed {
                &counters.replayed
            } else {
                &counters.executed
            };
            counter.fetch_add(1, Ordering::SeqCst);
            counters.acked.lock().expect("lock").insert(msg.id.clone());
            Disposition::Ack
        }
    }
}

async fn worker(consumer: Arc<Consumer>, broker: Arc<Broker>, counters: Arc<Counters>) {
    while let Some(delivery) = broker.next().await {
        if let Disposition::Redeliver(after) =
            process(&consumer, &counters, &delivery.msg, delivery.fate).await
        {
            broker.publish_later(
                Delivery {
                    msg: delivery.msg,
                    fate: Fate::Normal,
                },
                after,
            );
        }
        broker.done();
    }
}

/// When a message is delivered a second time.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Again {
    Never,
    AtOnce,
    Later(Duration),
}

/// One message, its first delivery's fate, and its duplicate.
#[derive(Clone, Debug)]
struct Planned {
    msg: OrderPlaced,
    label: &'static str,
    fate: Fate,
    again: Again,
}

/// The producer's plan: which messages are duplicated, crash a worker, or
/// meet a carrier outage.
fn plan() -> Vec<Planned> {
    (0..MESSAGES)
        .map(|i| {
            let order = u32::try_from(i).unwrap_or(u32::MAX) + 1000;
            let msg = OrderPlaced {
                id: format!("msg-{i:04}"),
                order,
                sku: if i % 25 == 24 {
                    "unobtainium".into()
                } else {
                    format!("sku-{}", i % 7)
                },
                quantity: 1 + order % 3,
            };
            let (label, fate, again) = match i % 10 {
                0 => ("delivered twice at once", Fate::Normal, Again::AtOnce),
                3 => (
                    "delivered again later",
                    Fate::Normal,
                    Again::Later(Duration::from_millis(150)),
                ),
                5 => (
                    "worker cancelled mid-processing",
                    Fate::Cancelled,
                    Again::Never,
                ),
                7 => ("worker killed mid-processing", Fate::Killed, Again::Never),
                8 => (
                    "carrier down on first attempt",
                    Fate::CarrierDown,
                    Again::Never,
                ),
                _ => ("delivered once", Fate::Normal, Again::Never),
            };
            Planned {
                msg,
                label,
                fate,
                again,
            }
        })
        .collect()
}

fn plan_counts(plan: &[Planned]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for p in plan {
        *counts.entry(p.label).or_default() += 1;
    }
    counts
}

/// Publishes the plan on the in-memory broker.
fn publish(broker: &Arc<Broker>, plan: &[Planned]) {
    for p in plan {
        broker.publish(Delivery {
            msg: p.msg.clone(),
            fate: p.fate,
        });
        match p.again {
            Again::AtOnce => broker.publish(Delivery {
                msg: p.msg.clone(),
                fate: Fate::Normal,
            }),
            Again::Later(after) => broker.publish_later(
                Delivery {
                    msg: p.msg.clone(),
                    fate: Fate::Normal,
                },
                after,
            ),
            Again::Never => {}
        }
    }
}

/// Prints what happened and checks that each message took effect exactly once.
fn report(
    broker_name: &str,
    plan: &BTreeMap<&str, usize>,
    deliveries: usize,
    c: &Counters,
    warehouse: &Warehouse,
) -> ExitCode {
    println!("queue_consumer: {MESSAGES} messages, {WORKERS} workers, {broker_name}");
    for (label, n) in plan {
        println!("  {n:>4} {label}");
    }
    println!("deliveries: {deliveries}");
    println!(
        "  executed:                   {}",
        c.executed.load(Ordering::SeqCst)
    );
    println!(
        "  replayed:                   {}",
        c.replayed.load(Ordering::SeqCst)
    );
    println!(
        "  in flight, redelivered:     {}",
        c.in_flight.load(Ordering::SeqCst)
    );
    println!(
        "  transient failure, retried: {}",
        c.transient.load(Ordering::SeqCst)
    );
    println!(
        "  worker cancelled:           {}",
        c.cancelled.load(Ordering::SeqCst)
    );
    println!(
        "  worker killed:              {}",
        c.killed.load(Ordering::SeqCst)
    );

    let shipments = warehouse.shipments.lock().expect("lock").clone();
    let refusals = warehouse.refusals.lock().expect("lock").clone();
    let acked = c.acked.lock().expect("lock").clone();
    let mut failures = Vec::new();
    for i in 0..MESSAGES {
        let id = format!("msg-{i:04}");
        let effects =
            shipments.get(&id).copied().unwrap_or(0) + refusals.get(&id).copied().unwrap_or(0);
        if effects != 1 {
            failures.push(format!("{id}: effect happened {effects} times"));
        }
        if !acked.contains(&id) {
            failures.push(format!("{id}: never acknowledged"));
        }
    }
    if c.executed.load(Ordering::SeqCst) != MESSAGES {
        failures.push(format!(
            "{} executions recorded for {MESSAGES} messages",
            c.executed.load(Ordering::SeqCst)
        ));
    }
    println!(
        "checked: each of {MESSAGES} messages acknowledged, and its effect ({} shipments, {} out-of-stock refusals) happened exactly once",
        shipments.len(),
        refusals.len()
    );
    if failures.is_empty() {
        println!("OK: exactly once");
        ExitCode::SUCCESS
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let plan = plan();
    let warehouse = Arc::new(Warehouse::default());
    let counters = Arc::new(Counters::default());
    // A short lease so that a killed worker's claim is taken over quickly.
    let policy = Policy::default()
        .lease(Duration::from_millis(300))
        .ttl(Duration::from_hours(1));

    let (name, deliveries) = if let Ok(url) = std::env::var("REDIS_URL") {
        match streams::run(&url, &plan, policy, &warehouse, &counters).await {
            Ok(deliveries) => ("a Redis Stream consumer group, RedisStore", deliveries),
            Err(e) => {
                eprintln!("FAILED: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        let consumer = Arc::new(Consumer {
            engine: Engine::new(MemoryStore::new()).with_policy(policy),
            warehouse: Arc::clone(&warehouse),
        });
        let broker = Arc::new(Broker::default());
        publish(&broker, &plan);
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                tokio::spawn(worker(
                    Arc::clone(&consumer),
                    Arc::clone(&broker),
                    Arc::clone(&counters),
                ))
            })
            .collect();
        let all = async {
            for w in workers {
                w.await.expect("worker panicked");
            }
        };
        if tokio::time::timeout(Duration::from_mins(1), all)
            .await
            .is_err()
        {
            eprintln!("FAILED: the consumers did not drain the queue within 60s");
            return ExitCode::FAILURE;
        }
        (
            "an in-memory broker, MemoryStore",
            broker.deliveries.load(Ordering::SeqCst),
        )
    };
    report(name, &plan_counts(&plan), deliveries, &counters, &warehouse)
}
