//! Consumer throughput: messages per second consumed through each broker
//! (RabbitMQ, NATS JetStream, Redis Streams) with a trivial handler (read
//! the order, build a receipt), without idem and with it (`idem-queue`'s
//! adapter and pipeline, on the memory store and on Redis), side by side in
//! one run. Each round fills a fresh queue or stream with the messages
//! first, then times only their consumption; the variants alternate
//! round by round, and the report gives each one's median and its ratio to
//! the consumer without idem.
//!
//! The consumer without idem does what the adapter does around the
//! pipeline, the same way: RabbitMQ prefetch 16, the deliveries ready handed
//! over together to a task, `basic.ack` each; JetStream a pull consumer,
//! the messages ready handed over together, 16 handlers at once, a double
//! ack each; Redis Streams `XPENDING` for entries to take over,
//! `XREADGROUP` 16 at a time, `XACK` each. idem runs on the memory store, on
//! Redis (each fetched batch's claims in one script call and its
//! completions in one, the default) and on Redis a call each
//! (`with_batching(false)`). Beside them, the consumer without idem with
//! the least design on Redis around its handler (`SET NX` and `SET`, a
//! fetched batch's in one pipeline each): where the floor is for any
//! design that records each message in Redis.
//!
//! Each round also reports the CPU a message takes in this process (the
//! consumer) and in Redis (`INFO cpu`), and the script calls a message
//! makes with their Redis CPU (`INFO commandstats`).
//!
//! `cargo bench -p idem-tests --bench queue_load [-- rabbitmq|nats|redis|sqs]`
//! (the brokers on their usual ports; `scripts/services.sh` starts them;
//! `sqs` is moto's server, an emulator: only its ratios mean anything).

#![allow(missing_docs)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{Claim, Engine, MemoryStore, Never};
use idem_queue::{handler_fn, Consumer, Handler, KeySource};
use serde::Deserialize;

#[path = "common/queue_rounds.rs"]
mod queue_rounds;
use queue_rounds::{nats_round, rabbitmq_round, redis_round};
#[path = "common/sqs_round.rs"]
mod sqs_round;
use sqs_round::sqs_round;

const MESSAGES: usize = 5_000;

/// The messages of a round on `broker`: fewer on SQS, whose emulator reads
/// its queue whole at every receive.
fn messages(broker: &str) -> usize {
    if broker == "sqs" {
        SQS_MESSAGES
    } else {
        MESSAGES
    }
}

/// The messages of a round on SQS.
const SQS_MESSAGES: usize = 300;
const ROUNDS: usize = 5;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Run = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

#[derive(Deserialize)]
struct Order {
    order_id: String,
    sku: String,
}

fn receipt(order: &Order) -> String {
    format!("receipt of {} for {}", order.sku, order.order_id)
}

fn payload(round: usize, i: usize) -> String {
    format!(r#"{{"order_id":"r{round}-{i}","sku":"tea"}}"#)
}

/// The consumer with idem, on `engine`, counting what it handled.
fn with_idem(engine: Engine, handled: Arc<AtomicUsize>) -> Arc<Consumer<impl Handler>> {
    let ship = handler_fn(move |order: Order, _claim: Claim| {
        let handled = Arc::clone(&handled);
        async move {
            let r = receipt(&order);
            handled.fetch_add(1, Ordering::Relaxed);
            Ok::<_, Never>(r)
        }
    });
    Arc::new(Consumer::new(engine, "bench-order", ship).key(KeySource::Field("/order_id".into())))
}

/// The bare handler: read the order, build the receipt.
fn bare(data: &[u8], handled: &AtomicUsize) {
    if let Ok(order) = serde_json::from_slice::<Order>(data) {
        std::hint::black_box(receipt(&order));
        handled.fetch_add(1, Ordering::Relaxed);
    }
}

/// The consumer without idem's handling of a batch of payloads: the bare
/// handler each, or (for [`Variant::Least`]) the least design on Redis
/// around it.
#[derive(Clone)]
struct Plain {
    least: Option<(redis::aio::MultiplexedConnection, String)>,
}

impl Plain {
    async fn new(variant: Variant, broker: &str, round: usize) -> Result<Self, Error> {
        if variant != Variant::Least {
            return Ok(Self { least: None });
        }
        let con = redis::Client::open("redis://127.0.0.1:6379")?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self {
            least: Some((con, prefix(broker, round, variant))),
        })
    }

    /// Handles one fetched batch; the caller acknowledges each after.
    async fn handle(&self, payloads: &[&[u8]], handled: &AtomicUsize) -> Result<(), Error> {
        let Some((con, prefix)) = &self.least else {
            for data in payloads {
                bare(data, handled);
            }
            return Ok(());
        };
        let orders: Vec<Order> = payloads
            .iter()
            .filter_map(|d| serde_json::from_slice(d).ok())
            .collect();
        let mut claims = redis::pipe();
        for order in &orders {
            claims
                .cmd("SET")
                .arg(format!("{prefix}{}", order.order_id))
                .arg("")
                .arg("NX")
                .arg("PX")
                .arg(60_000);
        }
        let claimed: Vec<Option<String>> = claims.query_async(&mut con.clone()).await?;
        let mut records = redis::pipe();
        for (order, claimed) in orders.iter().zip(claimed) {
            if claimed.is_some() {
                records
                    .cmd("SET")
                    .arg(format!("{prefix}{}", order.order_id))
                    .arg(receipt(order))
                    .arg("PX")
                    .arg(86_400_000)
                    .ignore();
            }
            handled.fetch_add(1, Ordering::Relaxed);
        }
        let () = records.query_async(&mut con.clone()).await?;
        Ok(())
    }
}

/// The Redis keys one round of one variant writes under.
fn prefix(broker: &str, round: usize, variant: Variant) -> String {
    format!(
        "idem-bench:queue:{}:{broker}:{round}:{variant:?}:",
        std::process::id()
    )
}

/// Deletes what a round wrote in Redis, so rounds and runs do not pile up
/// keys in a shared server.
async fn forget(broker: &str, round: usize, variant: Variant) -> Result<(), Error> {
    let mut con = redis::Client::open("redis://127.0.0.1:6379")?
        .get_multiplexed_async_connection()
        .await?;
    let pattern = format!("{}*", prefix(broker, round, variant));
    let mut cursor = 0_u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(&mut con)
            .await?;
        if !keys.is_empty() {
            let _: u64 = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut con)
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Bare,
    /// The bare consumer with the least design on Redis around its handler:
    /// a fetched batch's keys claimed with `SET NX` in one pipeline, their
    /// receipts written with `SET` in another (no script, no fencing, no
    /// fingerprint). What any design that records each message in Redis
    /// pays at least.
    Least,
    Memory,
    /// The store's default: claims and completions asked for at once share
    /// script calls.
    Redis,
    /// Each claim and completion a script call of its own
    /// (`with_batching(false)`), as the version before did.
    RedisAlone,
}

const VARIANTS: [Variant; 5] = [
    Variant::Bare,
    Variant::Least,
    Variant::Memory,
    Variant::Redis,
    Variant::RedisAlone,
];

async fn engine(variant: Variant, broker: &str, round: usize) -> Engine {
    match variant {
        Variant::Redis | Variant::RedisAlone => {
            let store = idem_redis::RedisStore::connect("redis://127.0.0.1:6379")
                .await
                .expect("redis")
                .with_prefix(&prefix(broker, round, variant))
                .with_batching(variant == Variant::Redis);
            Engine::new(store)
        }
        _ => Engine::new(MemoryStore::new()),
    }
}

/// Runs `run` until `handled` reaches the round's messages; its time.
async fn timed(run: Run, handled: &AtomicUsize) -> Duration {
    timed_for(run, handled, MESSAGES).await
}

/// Runs `run` until `handled` reaches `messages`; its time.
async fn timed_for(run: Run, handled: &AtomicUsize, messages: usize) -> Duration {
    let started = Instant::now();
    let task = tokio::spawn(run);
    while handled.load(Ordering::Relaxed) < messages {
        assert!(!task.is_finished(), "the consumer stopped early");
        assert!(
            started.elapsed() < Duration::from_mins(2),
            "{} of {messages} handled in two minutes",
            handled.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    task.abort();
    took
}

/// This process's CPU time so far (user and system), in microseconds
/// (`/proc/self/stat`, in clock ticks of 10 ms).
fn own_cpu_us() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    fields.iter().sum::<u64>() * 10_000
}

/// Redis's CPU time so far (`INFO cpu`, user and system), in microseconds.
async fn redis_cpu_us(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(con)
        .await
        .unwrap_or_default();
    let seconds: f64 = info
        .lines()
        .filter_map(|l| {
            l.strip_prefix("used_cpu_sys:")
                .or_else(|| l.strip_prefix("used_cpu_user:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let us = (seconds * 1e6) as u64;
    us
}

/// `EVALSHA` calls and their microseconds of Redis CPU between two
/// readings of `INFO commandstats`.
fn script_calls(
    before: &std::collections::BTreeMap<String, (u64, u64)>,
    after: &std::collections::BTreeMap<String, (u64, u64)>,
) -> (u64, u64) {
    let of = |m: &std::collections::BTreeMap<String, (u64, u64)>| {
        m.get("evalsha").copied().unwrap_or_default()
    };
    let ((c0, u0), (c1, u1)) = (of(before), of(after));
    (c1.saturating_sub(c0), u1.saturating_sub(u0))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn bench(broker: &str) -> Result<(), Error> {
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    let mut costs: Vec<Vec<(f64, f64)>> = vec![Vec::new(); VARIANTS.len()];
    let mut cpus: Vec<Vec<(f64, f64)>> = vec![Vec::new(); VARIANTS.len()];
    let mut stats = redis::Client::open("redis://127.0.0.1:6379")?
        .get_multiplexed_async_connection()
        .await?;
    for round in 0..ROUNDS {
        for (v, variant) in VARIANTS.iter().enumerate() {
            let before = idem_tests::redis_command_stats(&mut stats).await;
            let cpu_before = (own_cpu_us(), redis_cpu_us(&mut stats).await);
            let took = match broker {
                "rabbitmq" => rabbitmq_round(*variant, round).await?,
                "nats" => nats_round(*variant, round).await?,
                "sqs" => sqs_round(*variant, round).await?,
                _ => redis_round(*variant, round).await?,
            };
            let cpu_after = (own_cpu_us(), redis_cpu_us(&mut stats).await);
            let after = idem_tests::redis_command_stats(&mut stats).await;
            let (calls, usec) = script_calls(&before, &after);
            let n = messages(broker);
            #[allow(clippy::cast_precision_loss)]
            let (rate, calls, usec, own, redis) = (
                n as f64 / took.as_secs_f64(),
                calls as f64 / n as f64,
                usec as f64 / n as f64,
                cpu_after.0.saturating_sub(cpu_before.0) as f64 / n as f64,
                cpu_after.1.saturating_sub(cpu_before.1) as f64 / n as f64,
            );
            println!(
                "{broker} round {round} {variant:?}: {rate:.0} msg/s; CPU a message: consumer {own:.1} µs, Redis {redis:.1} µs; script calls a message {calls:.2}, their Redis CPU {usec:.1} µs"
            );
            rates[v].push(rate);
            costs[v].push((calls, usec));
            cpus[v].push((own, redis));
        }
    }
    for (variant, cpus) in VARIANTS.iter().zip(cpus) {
        let own = median(cpus.iter().map(|c| c.0).collect());
        let redis = median(cpus.iter().map(|c| c.1).collect());
        println!(
            "{broker} {variant:?}: CPU a message: consumer {own:.1} µs, Redis {redis:.1} µs (medians; the broker's own not counted)"
        );
    }
    for (variant, costs) in VARIANTS.iter().zip(costs) {
        if matches!(variant, Variant::Redis | Variant::RedisAlone) {
            let calls = median(costs.iter().map(|c| c.0).collect());
            let usec = median(costs.iter().map(|c| c.1).collect());
            println!(
                "{broker} {variant:?}: script calls a message {calls:.2}, their Redis CPU {usec:.1} µs (medians)"
            );
        }
    }
    let medians: Vec<f64> = rates.into_iter().map(median).collect();
    let of = |v: Variant| medians[VARIANTS.iter().position(|x| *x == v).unwrap_or(0)];
    let bare = of(Variant::Bare);
    println!(
        "{broker}: without idem {bare:.0} msg/s; the least design on Redis {:.0} ({:.3}); idem on memory {:.0} ({:.3}); idem on Redis {:.0} ({:.3}, {:.3} of the least design); on Redis, a call each {:.0} ({:.3})",
        of(Variant::Least),
        of(Variant::Least) / bare,
        of(Variant::Memory),
        of(Variant::Memory) / bare,
        of(Variant::Redis),
        of(Variant::Redis) / bare,
        of(Variant::Redis) / of(Variant::Least),
        of(Variant::RedisAlone),
        of(Variant::RedisAlone) / bare,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt::init();
    }
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    for broker in ["rabbitmq", "nats", "redis", "sqs"] {
        if only.as_deref().is_none_or(|o| o == broker) {
            bench(broker).await?;
        }
    }
    Ok(())
}
