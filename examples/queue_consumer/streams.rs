//! The queue consumer on a real Redis Stream (when `REDIS_URL` is set): the
//! producer `XADD`s the plan, workers read through a consumer group with
//! `XREADGROUP`, acknowledge with `XACK`, and take over entries left
//! unacknowledged (crashed workers, outages, duplicates in flight) with
//! `XAUTOCLAIM`. Records live in Redis through `RedisStore`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{Engine, Policy};
use idem_redis::RedisStore;
use redis::aio::ConnectionManager;
use redis::Value;

use super::{
    process, Again, Consumer, Counters, Disposition, Fate, OrderPlaced, Planned, Warehouse, WORKERS,
};

const GROUP: &str = "shippers";
/// An entry unacknowledged for this long is taken over by another worker.
const MIN_IDLE_MS: u64 = 250;

struct Shared {
    redis: ConnectionManager,
    stream: String,
    published: AtomicUsize,
    expected: usize,
    acked: AtomicUsize,
    deliveries: AtomicUsize,
}

fn fate_name(fate: Fate) -> &'static str {
    match fate {
        Fate::Normal => "normal",
        Fate::Cancelled => "cancelled",
        Fate::Killed => "killed",
        Fate::CarrierDown => "carrier_down",
    }
}

fn fate_of(name: &[u8]) -> Fate {
    match name {
        b"cancelled" => Fate::Cancelled,
        b"killed" => Fate::Killed,
        b"carrier_down" => Fate::CarrierDown,
        _ => Fate::Normal,
    }
}

fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// A stream entry's fields.
type Fields = HashMap<Vec<u8>, Vec<u8>>;

/// Reads `[id, [field, value, ...]]` entries.
fn entries(list: &Value) -> Vec<(String, Fields)> {
    let Value::Array(items) = list else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|entry| {
            let Value::Array(parts) = entry else {
                return None;
            };
            let id = String::from_utf8_lossy(bytes(parts.first()?)?).into_owned();
            let Value::Array(kv) = parts.get(1)? else {
                return None;
            };
            let fields = kv
                .chunks(2)
                .filter_map(|p| Some((bytes(p.first()?)?.to_vec(), bytes(p.get(1)?)?.to_vec())))
                .collect();
            Some((id, fields))
        })
        .collect()
}

async fn xadd(shared: &Shared, msg: &OrderPlaced, fate: Fate) -> Result<(), String> {
    let json = serde_json::to_string(msg).map_err(|e| e.to_string())?;
    let mut c = shared.redis.clone();
    let _: String = redis::cmd("XADD")
        .arg(&shared.stream)
        .arg("*")
        .arg("msg")
        .arg(json)
        .arg("fate")
        .arg(fate_name(fate))
        .query_async(&mut c)
        .await
        .map_err(|e| format!("XADD: {e}"))?;
    shared.published.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn produce(shared: Arc<Shared>, plan: Vec<Planned>) -> Result<(), String> {
    let mut later = Vec::new();
    for p in &plan {
        xadd(&shared, &p.msg, p.fate).await?;
        match p.again {
            Again::AtOnce => xadd(&shared, &p.msg, Fate::Normal).await?,
            Again::Later(after) => {
                let (shared, msg) = (Arc::clone(&shared), p.msg.clone());
                later.push(tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    xadd(&shared, &msg, Fate::Normal).await
                }));
            }
            Again::Never => {}
        }
    }
    for l in later {
        l.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

async fn consume(
    shared: Arc<Shared>,
    consumer: Arc<Consumer>,
    counters: Arc<Counters>,
    name: String,
) -> Result<(), String> {
    let mut c = shared.redis.clone();
    while shared.acked.load(Ordering::SeqCst) < shared.expected {
        // First, entries other workers left unacknowledged for too long.
        let claimed: Value = redis::cmd("XAUTOCLAIM")
            .arg(&shared.stream)
            .arg(GROUP)
            .arg(&name)
            .arg(MIN_IDLE_MS)
            .arg("0-0")
            .arg("COUNT")
            .arg(10)
            .query_async(&mut c)
            .await
            .map_err(|e| format!("XAUTOCLAIM: {e}"))?;
        let mut batch: Vec<(String, Fields, bool)> = match &claimed {
            Value::Array(parts) => parts
                .get(1)
                .map(entries)
                .unwrap_or_default()
                .into_iter()
                .map(|(id, f)| (id, f, true))
                .collect(),
            _ => Vec::new(),
        };
        if batch.is_empty() {
            // Then new entries.
            let read: Value = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(&name)
                .arg("COUNT")
                .arg(10)
                .arg("BLOCK")
                .arg(50)
                .arg("STREAMS")
                .arg(&shared.stream)
                .arg(">")
                .query_async(&mut c)
                .await
                .map_err(|e| format!("XREADGROUP: {e}"))?;
            if let Value::Array(streams) = &read {
                for s in streams {
                    if let Value::Array(parts) = s {
                        batch.extend(
                            parts
                                .get(1)
                                .map(entries)
                                .unwrap_or_default()
                                .into_iter()
                                .map(|(id, f)| (id, f, false)),
                        );
                    }
                }
            }
        }
        for (id, fields, redelivered) in batch {
            shared.deliveries.fetch_add(1, Ordering::SeqCst);
            let msg: OrderPlaced = fields
                .get(&b"msg"[..])
                .and_then(|m| serde_json::from_slice(m).ok())
                .ok_or_else(|| format!("entry {id} has no readable msg field"))?;
            // A planned crash or outage hits the first delivery only.
            let fate = if redelivered {
                Fate::Normal
            } else {
                fate_of(fields.get(&b"fate"[..]).map_or(&b""[..], Vec::as_slice))
            };
            if process(&consumer, &counters, &msg, fate).await == Disposition::Ack {
                let n: u64 = redis::cmd("XACK")
                    .arg(&shared.stream)
                    .arg(GROUP)
                    .arg(&id)
                    .query_async(&mut c)
                    .await
                    .map_err(|e| format!("XACK: {e}"))?;
                shared
                    .acked
                    .fetch_add(usize::try_from(n).unwrap_or(0), Ordering::SeqCst);
            }
            // Otherwise the entry stays pending, and XAUTOCLAIM redelivers it.
        }
    }
    Ok(())
}

/// Runs the plan through a Redis Stream; returns the number of deliveries.
pub(crate) async fn run(
    url: &str,
    plan: &[Planned],
    policy: Policy,
    warehouse: &Arc<Warehouse>,
    counters: &Arc<Counters>,
) -> Result<usize, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let run = format!("queue_consumer:{}:{nanos}", std::process::id());
    let client = redis::Client::open(url).map_err(|e| format!("REDIS_URL is not valid: {e}"))?;
    let redis = ConnectionManager::new(client)
        .await
        .map_err(|e| format!("cannot connect to Redis: {e}"))?;
    let store = RedisStore::connect(url)
        .await
        .map_err(|e| e.to_string())?
        .with_prefix(&format!("{run}:idem:"));
    let consumer = Arc::new(Consumer {
        engine: Engine::new(store).with_policy(policy),
        warehouse: Arc::clone(warehouse),
    });
    let expected = plan
        .iter()
        .map(|p| if p.again == Again::Never { 1 } else { 2 })
        .sum();
    let shared = Arc::new(Shared {
        redis,
        stream: format!("{run}:orders"),
        published: AtomicUsize::new(0),
        expected,
        acked: AtomicUsize::new(0),
        deliveries: AtomicUsize::new(0),
    });
    let mut c = shared.redis.clone();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&shared.stream)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut c)
        .await
        .map_err(|e| format!("XGROUP CREATE: {e}"))?;

    let started = Instant::now();
    let producer = tokio::spawn(produce(Arc::clone(&shared), plan.to_vec()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            tokio::spawn(consume(
                Arc::clone(&shared),
                Arc::clone(&consumer),
                Arc::clone(counters),
                format!("worker-{i}"),
            ))
        })
        .collect();
    let all = async {
        producer.await.map_err(|e| e.to_string())??;
        for w in workers {
            w.await.map_err(|e| e.to_string())??;
        }
        Ok::<(), String>(())
    };
    let outcome = tokio::time::timeout(Duration::from_mins(1), all).await;
    let pending: Value = redis::cmd("XPENDING")
        .arg(&shared.stream)
        .arg(GROUP)
        .query_async(&mut c)
        .await
        .map_err(|e| format!("XPENDING: {e}"))?;
    let _: () = redis::cmd("DEL")
        .arg(&shared.stream)
        .query_async(&mut c)
        .await
        .map_err(|e| format!("DEL: {e}"))?;
    match outcome {
        Err(_) => return Err("the consumers did not drain the stream within 60s".into()),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => {}
    }
    let pending_count = match &pending {
        Value::Array(parts) => match parts.first() {
            Some(Value::Int(n)) => *n,
            _ => -1,
        },
        _ => -1,
    };
    println!(
        "stream {}: {} entries published, all acknowledged ({} pending) in {:?}",
        shared.stream,
        shared.published.load(Ordering::SeqCst),
        pending_count,
        started.elapsed()
    );
    if pending_count != 0 {
        return Err(format!("{pending_count} entries are still pending"));
    }
    Ok(shared.deliveries.load(Ordering::SeqCst))
}
