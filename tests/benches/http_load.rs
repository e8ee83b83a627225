//! Load benchmark: the payments debit route with idem (memory store) against
//! the same route without idem, side by side in one run, driven by `wrk` over
//! 127.0.0.1 with a fresh `Idempotency-Key` on every request (every request
//! is a first request: one begin and one complete). The `memory` run has a
//! third server between the two: the same route claiming the key in a map
//! and recording the response there, the least any design does (the floor
//! under idem's cost).
//!
//! `cargo bench -p idem-tests --bench http_load [-- memory|redis|postgres|mariadb|sqlite|actix|grpc]` (needs `wrk`:
//! `apt-get install wrk`). `actix` is the same pair on actix-web
//! (`idem_actix::Idempotency` or not, around one handler); `grpc` is the
//! gRPC example's `Debit` with `idem_tonic::IdempotencyLayer` or not,
//! driven by 32 concurrent tonic clients on 8 connections in this process
//! (wrk speaks no gRPC). The redis pair compares `RedisStore` with a
//! baseline doing only `SET NX` and `SET` on the same Redis. `-- redis-own-core`
//! runs the redis pair with Redis pinned to core 1 and this process (server
//! and `wrk`) to core 0, as when Redis has its own host (needs `taskset` and
//! two cores; the affinities are restored after). `-- redis-fenced` runs
//! idem on Redis with the balances in Redis, each debit applied and then
//! recorded (the design before issue 23) against each debit committed with
//! its record in one script call (`RedisTransaction`): the fence's cost.
//! `-- redis-replicated` runs idem behind Sentinel (a primary, two replicas
//! and three Sentinels started for the run) without and with
//! `with_replication(1, 100ms)`: the cost of `WAIT`;
//! `-- redis-replicated-own-core` the same with the servers and Sentinels on
//! core 1 and this process on core 0. `-- mariadb` runs idem on MariaDB
//! (`MySqlStore`) against `INSERT IGNORE` + `UPDATE` on the same server;
//! `-- sqlite` idem on SQLite (`SqliteStore`) against `INSERT OR IGNORE` +
//! `UPDATE` in a file with the same settings.
//!
//! `-- peer` and `-- peer-redis` put the strongest Rust peer, the
//! `idempotent` crate's tower layer (`tests/peer-idempotent`, a crate of its
//! own that this bench builds), between the route without idem (on Redis:
//! the least design) and idem, on memory and on the same Redis.
//! `-- redis-floor` puts the least design that fences (two minimal scripts,
//! `common/fenced_floor.rs`) between the least design and idem.
//!
//! `-- replay` and `-- redis-replay` record 500 requests first and then
//! send only those: every request idem answers is a replay (on memory, or
//! on Redis), against the bare route running a debit each time and the
//! least design answering with the body it recorded;
//! `-- redis-replay-cached` the same with the store's replay cache
//! (`RedisStore::with_replay_cache`). Every
//! round reports the median and 99th percentile latency beside its rate.
//!
//! Rounds alternate between the two servers so that drift on a noisy machine
//! hits both; the report gives the median of the rounds and the ratio.

#![allow(missing_docs)]

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::payments::{
    invalid_account, invalid_amount, router, App, Debit, Ledger, MemoryLedger, PgLedger, Receipt,
    RedisLedger,
};
use idem_postgres::PgStore;

#[path = "common/baseline.rs"]
mod baseline;
#[path = "common/fenced_floor.rs"]
mod fenced_floor;
#[path = "common/mysql_pair.rs"]
mod mysql_pair;
#[path = "common/naive.rs"]
mod naive;
#[path = "common/peer.rs"]
mod peer;
#[path = "common/sqlite_pair.rs"]
mod sqlite_pair;
use idem_redis::{KeyLayout, RedisStore};
use naive::{naive_router, MemoryKeys, Naive, NaiveKeys};

const ROUNDS: usize = 7;
const SECONDS: u32 = 4;
const CONNECTIONS: u32 = 32;

const SCRIPT: &str = r#"
math.randomseed(os.time() + math.floor(os.clock() * 1000000))
local prefix = tostring(math.random(1, 1000000000))
local n = 0
request = function()
  n = n + 1
  local path = "/accounts/acct-" .. (n % 500) .. "/debits"
  local headers = {}
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = prefix .. "-" .. n
  return wrk.format("POST", path, headers, '{"amount":1}')
end
"#;

/// The name the replay script is written under (its pairs are told apart
/// by it).
const REPLAY_SCRIPT_NAME: &str = "replay.lua";

/// Keys the replay pairs record before their rounds.
const REPLAY_KEYS: u32 = 500;

/// The same 500 requests, each under its own key, over and over: after
/// [`record_replays`], every request idem answers is a replay.
const REPLAY_SCRIPT: &str = r#"
local n = 0
request = function()
  n = n + 1
  local k = n % 500
  local headers = {}
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = "replay-" .. k
  return wrk.format("POST", "/accounts/acct-" .. k .. "/debits", headers, '{"amount":1}')
end
"#;

/// Sends each of the replay script's requests once, so that idem has
/// recorded them all before the rounds.
async fn record_replays(url: &str) -> Result<(), String> {
    let client = reqwest::Client::new();
    for k in 0..REPLAY_KEYS {
        let answer = client
            .post(format!("{url}/accounts/acct-{k}/debits"))
            .header("content-type", "application/json")
            .header("idempotency-key", format!("replay-{k}"))
            .body(r#"{"amount":1}"#)
            .send()
            .await
            .map_err(|e| format!("recording replay-{k}: {e}"))?;
        if !answer.status().is_success() {
            return Err(format!("recording replay-{k}: {}", answer.status()));
        }
    }
    Ok(())
}

fn app() -> App {
    // Records are kept 24 hours: room for every request of the run.
    app_on(MemoryStore::builder().max_bytes(16 << 30).build())
}

/// The payments app on `store`, its balances beside the records.
fn app_on(store: MemoryStore) -> App {
    let ledger = Arc::new(MemoryLedger::new(&store));
    app_with(Engine::new(store), ledger)
}

fn app_with(engine: Engine, ledger: Arc<dyn Ledger>) -> App {
    App {
        engine,
        ledger,
        debit_delay: Duration::ZERO,
        provider: None,
    }
}

/// Redis: `SET key "" NX PX` to claim, `SET key response PX` to record.
#[derive(Clone)]
struct RedisKeys {
    redis: redis::aio::ConnectionManager,
    prefix: String,
}

impl NaiveKeys for RedisKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        let claimed: Option<String> = redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg("")
            .arg("NX")
            .arg("PX")
            .arg(60_000)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(|e| e.to_string())?;
        Ok(claimed.is_some())
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg(response)
            .arg("PX")
            .arg(600_000)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(|e| e.to_string())
    }

    async fn recorded(&self, key: &str) -> Result<Option<bytes::Bytes>, String> {
        let value = fenced_floor::get(&self.redis, &format!("{}{key}", self.prefix)).await?;
        Ok(value.filter(|v| !v.is_empty()).map(bytes::Bytes::from))
    }
}

/// PostgreSQL: `INSERT ... ON CONFLICT DO NOTHING` to claim, `UPDATE` to
/// record, `SELECT` to replay.
#[derive(Clone)]
struct PgKeys {
    pool: sqlx::PgPool,
    claim_sql: Arc<str>,
    record_sql: Arc<str>,
    recorded_sql: Arc<str>,
}

impl NaiveKeys for PgKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&self.claim_sql)))
            .bind(key)
            .execute(&self.pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(|e| e.to_string())
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&self.record_sql)))
            .bind(key)
            .bind(response)
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn recorded(&self, key: &str) -> Result<Option<bytes::Bytes>, String> {
        let row: Option<(Option<Vec<u8>>,)> =
            sqlx::query_as(sqlx::AssertSqlSafe(Arc::clone(&self.recorded_sql)))
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| e.to_string())?;
        Ok(row.and_then(|(r,)| r).map(bytes::Bytes::from))
    }
}

/// The baseline and idem on Redis; with `replay_cache`, the store answers
/// retries of completed records from its replay cache (64 MiB, 5 s).
async fn redis_pair_with(replay_cache: bool) -> Result<(String, String), String> {
    redis_pair_traced(replay_cache, idem_redis::DEFAULT_TRACE).await
}

/// The redis pair, records traced `trace` after they expire.
async fn redis_pair_traced(
    replay_cache: bool,
    trace: Duration,
) -> Result<(String, String), String> {
    redis_pair_laid_out(replay_cache, trace, KeyLayout::default()).await
}

/// The redis pair, new records under `layout`'s keys.
async fn redis_pair_laid_out(
    replay_cache: bool,
    trace: Duration,
    layout: KeyLayout,
) -> Result<(String, String), String> {
    let url = idem_tests::redis_url();
    let run = format!("idem-bench:{}:", std::process::id());
    let redis = redis::aio::ConnectionManager::new(
        redis::Client::open(url.as_str()).map_err(|e| e.to_string())?,
    )
    .await
    .map_err(|e| format!("redis at {url}: {e}"))?;
    let naive = naive_router(Naive {
        app: app_on(MemoryStore::new()),
        keys: RedisKeys {
            redis,
            prefix: format!("{run}naive:"),
        },
    });
    let store = RedisStore::connect(&url)
        .await
        .map_err(|e| e.to_string())?
        .with_prefix(&format!("{run}idem:"))
        .with_expired_trace(trace)
        .with_key_layout(layout);
    let store = if replay_cache {
        store.with_replay_cache(64 << 20, Duration::from_secs(5))
    } else {
        store
    };
    // Records of this run expire after 10 minutes (and are deleted at the
    // end); balances in memory on both sides, as the baseline keeps them.
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
    let ledger = Unfenced(MemoryLedger::new(&MemoryStore::new()));
    Ok((
        idem_tests::serve(naive).await,
        idem_tests::serve(router(app_with(engine, Arc::new(ledger)))).await,
    ))
}

async fn redis_pair() -> Result<(String, String), String> {
    redis_pair_with(false).await
}

/// A ledger that debits on its own and leaves the record to the engine: the
/// design before fenced transactions (a holder that lost its claim could
/// still debit), kept to measure what the fence costs.
struct Unfenced<L>(L);

#[idem_core::async_trait]
impl<L: Ledger> Ledger for Unfenced<L> {
    async fn balance(&self, account: &str) -> Result<u64, idem_examples::payments::LedgerError> {
        self.0.balance(account).await
    }
    async fn debit(
        &self,
        account: &str,
        amount: u64,
    ) -> Result<u64, idem_examples::payments::LedgerError> {
        self.0.debit(account, amount).await
    }
}

/// idem on Redis with the balances in Redis too: each debit applied by the
/// ledger's own script and then recorded (`Unfenced`, the design before
/// issue 23), against each debit read and committed with its record in one
/// script call while the claim holds (`RedisTransaction`).
async fn redis_fenced_pair() -> Result<(String, String), String> {
    let url = idem_tests::redis_url();
    let run = format!("idem-bench:{}:", std::process::id());
    let mut urls = Vec::new();
    for (side, fenced) in [("unfenced", false), ("fenced", true)] {
        let store = RedisStore::connect(&url)
            .await
            .map_err(|e| e.to_string())?
            .with_prefix(&format!("{run}{side}:idem:"));
        let ledger = RedisLedger::connect(&url, &store, &format!("{run}{side}:balance:"))
            .await
            .map_err(|e| format!("redis at {url}: {e}"))?;
        let ledger: Arc<dyn Ledger> = if fenced {
            Arc::new(ledger)
        } else {
            Arc::new(Unfenced(ledger))
        };
        let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
        urls.push(idem_tests::serve(router(app_with(engine, ledger))).await);
    }
    let fenced = urls.pop().ok_or("no fenced server")?;
    let unfenced = urls.pop().ok_or("no unfenced server")?;
    Ok((unfenced, fenced))
}

/// idem on Redis behind Sentinel (a primary, two replicas, three
/// Sentinels of this run's own), records and balances in Redis, without
/// and with `with_replication(1, 100ms)`: the cost of `WAIT` per request.
async fn redis_replicated_pair(
    topology: &idem_tests::sentinel::PrivateSentinels,
) -> Result<(String, String), String> {
    let mut urls = Vec::new();
    for (side, replicas) in [("async", 0), ("replicated", 1)] {
        let store =
            RedisStore::connect_sentinel(topology.sentinel_urls(), idem_tests::sentinel::SERVICE)
                .await
                .map_err(|e| e.to_string())?
                .with_prefix(&format!("{side}:idem:"))
                .with_replication(replicas, Duration::from_millis(100));
        let primary = topology.primary().ok_or("no primary")?;
        let ledger = RedisLedger::connect(
            &format!("redis://127.0.0.1:{primary}"),
            &store,
            &format!("{side}:balance:"),
        )
        .await
        .map_err(|e| format!("redis: {e}"))?;
        let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
        urls.push(idem_tests::serve(router(app_with(engine, Arc::new(ledger)))).await);
    }
    let replicated = urls.pop().ok_or("no replicated server")?;
    let unreplicated = urls.pop().ok_or("no unreplicated server")?;
    Ok((unreplicated, replicated))
}

fn run_redis_replicated_pair(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let topology = idem_tests::sentinel::PrivateSentinels::start();
    let (unreplicated, replicated) = rt.block_on(redis_replicated_pair(&topology))?;
    compare(
        "redis-replicated",
        [
            "Sentinel, replication asynchronous",
            "Sentinel, with_replication(1, 100ms)",
        ],
        [&unreplicated, &replicated],
        script,
        Some("redis-server"),
    )
}

/// The durable pair with the Redis side on a core of its own: the primary,
/// its replicas and the Sentinels pinned to core 1, this process (the
/// services, wrk's driver, the replication proxy) to core 0, as when Redis
/// runs on hosts of its own.
fn redis_replicated_own_core(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let topology = idem_tests::sentinel::PrivateSentinels::start();
    let me = std::process::id();
    let my_mask = affinity(me)?;
    let pids = topology.pids();
    println!("redis-replicated-own-core: Redis servers and Sentinels (pids {pids:?}) on core 1; this process and wrk on core 0");
    for pid in &pids {
        set_affinity(*pid, "2", false)?;
    }
    let pinned = set_affinity(me, "1", true).and_then(|()| {
        let (unreplicated, replicated) = rt.block_on(redis_replicated_pair(&topology))?;
        compare(
            "redis-replicated-own-core",
            [
                "Sentinel, replication asynchronous",
                "Sentinel, with_replication(1, 100ms)",
            ],
            [&unreplicated, &replicated],
            script,
            Some("redis-server"),
        )
    });
    pinned.and(set_affinity(me, &my_mask, true))
}

fn run_redis_fenced_pair(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let (unfenced, fenced) = rt.block_on(redis_fenced_pair())?;
    compare_on_redis(
        rt,
        "redis-fenced",
        ["debit, then record (before)", "debit committed with record"],
        [&unfenced, &fenced],
        script,
    )
}

/// [`compare`] on Redis, then the run's keys deleted from Redis.
fn compare_on_redis<const N: usize>(
    rt: &tokio::runtime::Runtime,
    label: &str,
    names: [&str; N],
    urls: [&str; N],
    script: &str,
) -> Result<(), String> {
    let compared = compare(label, names, urls, script, Some("redis-server"));
    match rt.block_on(redis_cleanup()) {
        Ok(n) => println!("  deleted the run's {n} keys from Redis"),
        Err(e) => eprintln!("  could not delete the run's keys: {e}"),
    }
    compared
}

async fn redis_cleanup() -> Result<u64, redis::RedisError> {
    redis_cleanup_pattern(&format!("idem-bench:{}:*", std::process::id())).await
}

/// Deletes the keys matching `pattern`.
async fn redis_cleanup_pattern(pattern: &str) -> Result<u64, redis::RedisError> {
    let mut con = redis::Client::open(idem_tests::redis_url().as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let mut cursor: u64 = 0;
    let mut deleted = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(10_000)
            .query_async(&mut con)
            .await?;
        if !keys.is_empty() {
            let n: u64 = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut con)
                .await?;
            deleted += n;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

/// A migrated store and its ledger in a schema of this run.
async fn pg_ledger(pool: &sqlx::PgPool, schema: &str) -> Result<(PgStore, PgLedger), String> {
    let store = PgStore::new(pool.clone())
        .with_schema(schema)
        .map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.map_err(|e| e.to_string())?;
    Ok((store, ledger))
}

async fn pg_pair() -> Result<(String, String, Vec<String>), String> {
    let pool = idem_tests::pg_pool(32).await;
    let (idem_schema, naive_schema) = (
        format!("idem_bench_{}", std::process::id()),
        format!("idem_bench_naive_{}", std::process::id()),
    );
    let (store, ledger) = pg_ledger(&pool, &idem_schema).await?;
    let (_, naive_ledger) = pg_ledger(&pool, &naive_schema).await?;
    let keys = format!("\"{naive_schema}\".keys");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {keys} (key text PRIMARY KEY, response bytea)"
    )))
    .execute(&pool)
    .await
    .map_err(|e| e.to_string())?;
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
    let naive = naive_router(Naive {
        app: app_with(Engine::new(MemoryStore::new()), Arc::new(naive_ledger)),
        keys: PgKeys {
            pool,
            claim_sql: format!("INSERT INTO {keys} (key) VALUES ($1) ON CONFLICT DO NOTHING")
                .into(),
            record_sql: format!("UPDATE {keys} SET response = $2 WHERE key = $1").into(),
            recorded_sql: format!("SELECT response FROM {keys} WHERE key = $1").into(),
        },
    });
    Ok((
        idem_tests::serve(naive).await,
        idem_tests::serve(router(app_with(engine, Arc::new(ledger)))).await,
        vec![idem_schema, naive_schema],
    ))
}

async fn pg_cleanup(schemas: &[String]) -> Result<(), sqlx::Error> {
    let pool = idem_tests::pg_pool(1).await;
    for s in schemas {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS \"{s}\" CASCADE"
        )))
        .execute(&pool)
        .await?;
    }
    Ok(())
}

/// The load script plus a callback that prints the first non-2xx answers,
/// for a short diagnostic run after a failed round.
const DIAGNOSE: &str = r#"
local shown = 0
response = function(status, headers, body)
  if status >= 300 and shown < 3 then
    shown = shown + 1
    print("non-2xx answer: " .. status .. " " .. body)
  end
end
"#;

fn diagnose(url: &str, script: &str) -> String {
    let path = format!("{script}.diagnose.lua");
    let text = std::fs::read_to_string(script).unwrap_or_default() + DIAGNOSE;
    if std::fs::write(&path, text).is_err() {
        return String::new();
    }
    let out = Command::new("wrk")
        .args(["-t1", "-c4", "-d1s", "-s", &path, url])
        .output();
    let _ = std::fs::remove_file(&path);
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("non-2xx"))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .unwrap_or_default()
}

/// What one round measured: requests per second, and the latency of the
/// median and the 99th percentile request, in microseconds.
#[derive(Clone, Copy)]
struct Load {
    rps: f64,
    p50: f64,
    p99: f64,
}

/// A latency as wrk prints it (`792.00us`, `3.88ms`, `1.02s`), in
/// microseconds.
fn micros(text: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// One wrk run; returns its [`Load`], refusing runs with errors or non-2xx
/// answers (those would make a variant look faster than it is).
fn wrk(url: &str, script: &str) -> Result<Load, String> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{CONNECTIONS}"),
            &format!("-d{SECONDS}s"),
            "--latency",
            "-s",
            script,
            url,
        ])
        .output()
        .map_err(|e| format!("cannot run wrk ({e}); install it with `apt-get install wrk`"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(format!(
            "wrk saw errors or non-2xx answers:\n{text}\nsample now:\n{}",
            diagnose(url, script)
        ));
    }
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk output:\n{text}"))?;
    let percentile = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(p))
            .and_then(|v| micros(v.trim()))
            .ok_or_else(|| format!("no {p} latency in wrk output:\n{text}"))
    };
    Ok(Load {
        rps,
        p50: percentile("50%")?,
        p99: percentile("99%")?,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time (user + system, in clock ticks) used so far by this process
/// (`own`) and by each process named `store` (the Redis or PostgreSQL server
/// and all of its backends, by pid), read from `/proc`. `None` where `/proc`
/// is missing.
struct CpuTicks {
    own: u64,
    store: std::collections::HashMap<u32, u64>,
}

impl CpuTicks {
    /// `server`: the process serving the variant, if not this one.
    fn read(store: Option<&str>, server: Option<u32>) -> Option<Self> {
        fn ticks(stat: &str) -> Option<(String, u64)> {
            // pid (comm) state ... utime(14) stime(15): comm may hold spaces.
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_owned();
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((
                comm,
                f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
            ))
        }
        let own = match server {
            Some(pid) => format!("/proc/{pid}/stat"),
            None => "/proc/self/stat".to_owned(),
        };
        let own = ticks(&std::fs::read_to_string(own).ok()?)?.1;
        let mut by_pid = std::collections::HashMap::new();
        if let Some(store) = store {
            for entry in std::fs::read_dir("/proc").ok()?.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
                    continue;
                };
                if let Some((comm, t)) = std::fs::read_to_string(entry.path().join("stat"))
                    .ok()
                    .as_deref()
                    .and_then(ticks)
                {
                    if comm == store {
                        by_pid.insert(pid, t);
                    }
                }
            }
        }
        Some(Self { own, store: by_pid })
    }

    /// Ticks used since `earlier`: this process, and the store's processes
    /// (those started since count whole; those that exited since are lost,
    /// so the store's figure is a lower bound).
    fn since(&self, earlier: &Self) -> (u64, u64) {
        let store = self
            .store
            .iter()
            .map(|(pid, t)| t.saturating_sub(earlier.store.get(pid).copied().unwrap_or(0)))
            .sum();
        (self.own.saturating_sub(earlier.own), store)
    }
}

/// Tick counts of a few minutes' runs are far below 2^52: exact in `f64`.
fn ticks_f64(t: u64) -> f64 {
    f64::from(u32::try_from(t).unwrap_or(u32::MAX))
}

/// Linux's clock ticks per second for `/proc` CPU times.
const TICKS_PER_SECOND: f64 = 100.0;

/// `  ([median ]CPU per request: server S us[, store T us])`.
fn cpu_text(prefix: &str, store: Option<&str>, (server, theirs): (f64, f64)) -> String {
    match store {
        Some(name) => {
            format!("  ({prefix}CPU per request: server {server:.0} us, {name} {theirs:.0} us)")
        }
        None => format!("  ({prefix}CPU per request: server {server:.0} us)"),
    }
}

fn compare<const N: usize>(
    label: &str,
    names: [&str; N],
    urls: [&str; N],
    script: &str,
    store: Option<&str>,
) -> Result<(), String> {
    let keys = if script.ends_with(REPLAY_SCRIPT_NAME) {
        "the same 500 keys over and over (idem: every request a replay)"
    } else {
        "new key per request"
    };
    println!("{label}: POST /accounts/{{id}}/debits, {keys}, wrk -t1 -c{CONNECTIONS} -d{SECONDS}s, {ROUNDS} alternating rounds");
    compare_with(names, store, |v| wrk(urls[v], script))
}

/// [`compare`], with variants served by other processes (`servers[v]`, or
/// `None` for this one), whose CPU is theirs.
fn compare_served<const N: usize>(
    label: &str,
    names: [&str; N],
    urls: [&str; N],
    servers: [Option<u32>; N],
    script: &str,
    store: Option<&str>,
) -> Result<(), String> {
    println!("{label}: POST /accounts/{{id}}/debits, new key per request, wrk -t1 -c{CONNECTIONS} -d{SECONDS}s, {ROUNDS} alternating rounds");
    compare_in(names, servers, store, |v| wrk(urls[v], script))
}

/// Alternating rounds of `measure(variant)` (requests per second over
/// `SECONDS`), with the CPU each request cost, then the medians and the
/// ratios: of the last variant (idem) to the first (the baseline), and with
/// three, of each to the one before.
fn compare_with<const N: usize>(
    names: [&str; N],
    store: Option<&str>,
    measure: impl Fn(usize) -> Result<Load, String>,
) -> Result<(), String> {
    compare_in(names, [None; N], store, measure)
}

/// [`compare_with`], each variant served by `servers[v]` (`None`: this
/// process).
fn compare_in<const N: usize>(
    names: [&str; N],
    servers: [Option<u32>; N],
    store: Option<&str>,
    measure: impl Fn(usize) -> Result<Load, String>,
) -> Result<(), String> {
    let mut rps: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    // Latency of the median and the 99th percentile request, per round.
    let mut latency: [Vec<(f64, f64)>; N] = std::array::from_fn(|_| Vec::new());
    // CPU microseconds per request: [server, store] per variant and round.
    let mut cpu: [Vec<(f64, f64)>; N] = std::array::from_fn(|_| Vec::new());
    for round in 1..=ROUNDS {
        for v in 0..N {
            let before = CpuTicks::read(store, servers[v]);
            let Load { rps: r, p50, p99 } = measure(v)?;
            let used = before.zip(CpuTicks::read(store, servers[v])).map(|(b, a)| {
                let (own, theirs) = a.since(&b);
                let per_request =
                    |t: u64| ticks_f64(t) / TICKS_PER_SECOND * 1e6 / (r * f64::from(SECONDS));
                (per_request(own), per_request(theirs))
            });
            let detail = used.map_or(String::new(), |u| cpu_text("", store, u));
            println!(
                "  round {round}: {:<26} {r:>10.0} req/s  p50 {p50:.0} us, p99 {p99:.0} us{detail}",
                names[v]
            );
            rps[v].push(r);
            latency[v].push((p50, p99));
            cpu[v].extend(used);
        }
    }
    let rates = rps.map(median);
    for (v, &rate) in rates.iter().enumerate() {
        let detail = if cpu[v].is_empty() {
            String::new()
        } else {
            let server = median(cpu[v].iter().map(|c| c.0).collect());
            let theirs = median(cpu[v].iter().map(|c| c.1).collect());
            cpu_text("median ", store, (server, theirs))
        };
        let p50 = median(latency[v].iter().map(|l| l.0).collect());
        let p99 = median(latency[v].iter().map(|l| l.1).collect());
        println!(
            "  median {:<25} {rate:>10.0} req/s  p50 {p50:.0} us, p99 {p99:.0} us{detail}",
            names[v]
        );
    }
    if N > 2 {
        for v in 1..N {
            println!(
                "  ratio ({} / {}): {:.3}",
                names[v],
                names[v - 1],
                rates[v] / rates[v - 1]
            );
        }
    }
    println!("  ratio (idem / baseline): {:.3}", rates[N - 1] / rates[0]);
    Ok(())
}

/// The affinity mask of a process (hex, as `taskset -p` prints it).
fn affinity(pid: u32) -> Result<String, String> {
    let out = Command::new("taskset")
        .args(["-p", &pid.to_string()])
        .output()
        .map_err(|e| format!("cannot run taskset ({e})"))?;
    String::from_utf8_lossy(&out.stdout)
        .rsplit(": ")
        .next()
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .ok_or_else(|| format!("taskset -p {pid} printed no mask"))
}

/// Sets a process's affinity (`all`: every thread of it) to a hex mask.
fn set_affinity(pid: u32, mask: &str, all: bool) -> Result<(), String> {
    let flags = if all { "-ap" } else { "-p" };
    let status = Command::new("taskset")
        .args([flags, mask, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run taskset ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("taskset {flags} {mask} {pid} failed"))
    }
}

/// The pid of the Redis server the benchmark talks to, from `INFO server`.
async fn redis_pid() -> Result<u32, String> {
    let mut con = redis::Client::open(idem_tests::redis_url().as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| "INFO server has no process_id".to_owned())
}

/// The redis pair under `label`, then the run's keys deleted from Redis.
fn run_redis_pair(rt: &tokio::runtime::Runtime, label: &str, script: &str) -> Result<(), String> {
    let (naive, idem) = rt.block_on(redis_pair())?;
    compare_on_redis(
        rt,
        label,
        ["SET NX + SET (baseline)", "with idem (RedisStore)"],
        [&naive, &idem],
        script,
    )
}

/// What the late-retry trace costs: the redis pair's baseline, idem with
/// traces (the default) and idem without (`with_expired_trace(ZERO)`).
/// The price of fencing on Redis: the least design (`SET NX` + `SET`), the
/// least design that fences (two minimal scripts, `fenced_floor.rs`), and
/// idem.
fn run_redis_floor_trio(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let (naive, fenced, idem) = rt.block_on(async {
        let (naive, idem) = redis_pair().await?;
        let url = idem_tests::redis_url();
        let redis = redis::aio::ConnectionManager::new(
            redis::Client::open(url.as_str()).map_err(|e| e.to_string())?,
        )
        .await
        .map_err(|e| format!("redis at {url}: {e}"))?;
        let fenced = naive_router(Naive {
            app: app_on(MemoryStore::new()),
            keys: fenced_floor::FencedKeys::new(
                redis,
                format!("idem-bench:{}:fenced:", std::process::id()),
            ),
        });
        Ok::<_, String>((naive, idem_tests::serve(fenced).await, idem))
    })?;
    compare_on_redis(
        rt,
        "redis-floor",
        [
            "SET NX + SET (least design)",
            "two minimal scripts (least fenced design)",
            "with idem (RedisStore)",
        ],
        [&naive, &fenced, &idem],
        script,
    )
}

fn run_redis_trace_trio(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let ((naive, traced), (_, untraced)) = rt.block_on(async {
        let traced = redis_pair_traced(false, idem_redis::DEFAULT_TRACE).await?;
        let untraced = redis_pair_traced(false, Duration::ZERO).await?;
        Ok::<_, String>((traced, untraced))
    })?;
    compare_on_redis(
        rt,
        "redis-trace",
        [
            "SET NX + SET (baseline)",
            "with idem (RedisStore, traced a day)",
            "with idem (RedisStore, no trace)",
        ],
        [&naive, &traced, &untraced],
        script,
    )
}

/// What compact keys change: the redis pair's baseline, idem writing hex
/// keys (the default) and idem writing compact keys (both read both).
fn run_redis_layouts_trio(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let ((naive, hex), (_, compact)) = rt.block_on(async {
        let trace = idem_redis::DEFAULT_TRACE;
        let hex = redis_pair_laid_out(false, trace, KeyLayout::Hex).await?;
        let compact = redis_pair_laid_out(false, trace, KeyLayout::Compact).await?;
        Ok::<_, String>((hex, compact))
    })?;
    compare_on_redis(
        rt,
        "redis-layouts",
        [
            "SET NX + SET (baseline)",
            "with idem (RedisStore, hex keys)",
            "with idem (RedisStore, compact keys)",
        ],
        [&naive, &hex, &compact],
        script,
    )
}

/// The bare route against idem on memory answering replays only.
fn run_replay_pair(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let (bare, naive, idem) = rt.block_on(async {
        let naive = naive_router(Naive {
            app: app(),
            keys: MemoryKeys::default(),
        });
        let three = (
            idem_tests::serve(baseline::router(app())).await,
            idem_tests::serve(naive).await,
            idem_tests::serve(router(app())).await,
        );
        record_replays(&three.1).await?;
        record_replays(&three.2).await.map(|()| three)
    })?;
    compare(
        "replay",
        [
            "without idem (a debit)",
            "a map's recorded body",
            "with idem (a replay)",
        ],
        [&bare, &naive, &idem],
        script,
        None,
    )
}

/// The bare route against idem on Redis answering replays only, and the
/// round trip to Redis beside them: a replay costs idem one script call.
/// With `replay_cache`, the store's replay cache answers them.
fn run_redis_replay_pair(
    rt: &tokio::runtime::Runtime,
    script: &str,
    replay_cache: bool,
) -> Result<(), String> {
    let (bare, naive, idem, round_trip) = rt.block_on(async {
        let (naive, idem) = redis_pair_with(replay_cache).await?;
        record_replays(&naive).await?;
        record_replays(&idem).await?;
        let bare = idem_tests::serve(baseline::router(app())).await;
        Ok::<_, String>((bare, naive, idem, redis_round_trip().await?))
    })?;
    println!("  one Redis round trip (PING) from this process, median of 1000: {round_trip:.0} us");
    let (label, name) = if replay_cache {
        ("redis-replay-cached", "with idem (Redis, replay cache)")
    } else {
        ("redis-replay", "with idem (a Redis replay)")
    };
    compare_on_redis(
        rt,
        label,
        [
            "without idem (a debit)",
            "SET NX refused + GET (least design's replay)",
            name,
        ],
        [&bare, &naive, &idem],
        script,
    )
}

/// The median of 1000 sequential `PING`s to the benchmark's Redis, in
/// microseconds.
async fn redis_round_trip() -> Result<f64, String> {
    let mut con = redis::Client::open(idem_tests::redis_url().as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let mut took = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let sent = std::time::Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        took.push(sent.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(took))
}

/// The redis pair with Redis on core 1 and this process (server and `wrk`)
/// on core 0, as when Redis runs on its own host; both masks are restored
/// after.
fn redis_own_core(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let redis = rt.block_on(redis_pid())?;
    let me = std::process::id();
    let (redis_mask, my_mask) = (affinity(redis)?, affinity(me)?);
    println!("redis-own-core: Redis (pid {redis}) on core 1; this server and wrk on core 0");
    set_affinity(redis, "2", false)?;
    let pinned =
        set_affinity(me, "1", true).and_then(|()| run_redis_pair(rt, "redis-own-core", script));
    let restored = set_affinity(redis, &redis_mask, false).and(set_affinity(me, &my_mask, true));
    pinned.and(restored)
}

/// The debit on actix-web: the same checks, ledger and receipt as the
/// example's.
async fn actix_debit(
    ledger: actix_web::web::Data<Arc<dyn Ledger>>,
    id: actix_web::web::Path<String>,
    req: actix_web::web::Json<Debit>,
) -> actix_web::HttpResponse {
    if invalid_account(&id)
        .or_else(|| invalid_amount(&req))
        .is_some()
    {
        return actix_web::HttpResponse::BadRequest().finish();
    }
    match ledger.debit(&id, req.amount).await {
        Ok(balance) => actix_web::HttpResponse::Created().json(Receipt {
            debit_id: baseline::next_debit_id(),
            account: id.into_inner(),
            amount: req.amount,
            balance,
        }),
        Err(e) => actix_web::HttpResponse::ServiceUnavailable().body(e.to_string()),
    }
}

/// The actix-web debit without idem and with `idem_actix::Idempotency`.
fn actix_pair() -> [String; 2] {
    let serve = |with_idem: bool| {
        let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(&MemoryStore::new()));
        let engine = Engine::new(MemoryStore::builder().max_bytes(16 << 30).build());
        idem_tests::serve_actix(move || {
            // Both wrapped, so that only idem differs.
            let idempotency = actix_web::middleware::Condition::new(
                with_idem,
                idem_actix::Idempotency::new(engine.clone()),
            );
            actix_web::App::new()
                .app_data(actix_web::web::Data::new(Arc::clone(&ledger)))
                .service(
                    actix_web::web::resource("/accounts/{id}/debits")
                        .route(actix_web::web::post().to(actix_debit))
                        .wrap(idempotency),
                )
        })
    };
    [serve(false), serve(true)]
}

/// The gRPC example without the layer and with it; their addresses.
async fn grpc_pair() -> Result<[String; 2], String> {
    use idem_examples::grpc_payments::{idempotency, ledger_server::LedgerServer, Payments};
    let mut urls = Vec::new();
    for with_idem in [false, true] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        // The balances beside the records: with idem, each debit commits
        // with its record; without, on its own.
        let store = MemoryStore::builder().max_bytes(16 << 30).build();
        let payments = Payments {
            ledger: Arc::new(MemoryLedger::new(&store)),
            debit_delay: Duration::ZERO,
        };
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let engine = Engine::new(store);
        // Both through a layer stack, so that only idem differs.
        let layer = tower::util::option_layer(with_idem.then(|| idempotency(engine)));
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(layer)
                .add_service(LedgerServer::new(payments))
                .serve_with_incoming(incoming),
        );
        urls.push(url);
    }
    Ok([urls.remove(0), urls.remove(0)])
}

/// HTTP/2 connections the gRPC load spreads its calls over.
const GRPC_CHANNELS: u32 = 8;

/// `CONNECTIONS` concurrent debits, each with a new key, over
/// `GRPC_CHANNELS` HTTP/2 connections for `SECONDS`; returns completed calls per second, refusing a
/// run with any failed call.
fn grpc_load(rt: &tokio::runtime::Runtime, url: &str) -> Result<Load, String> {
    use idem_examples::grpc_payments::{ledger_client::LedgerClient, DebitRequest};
    rt.block_on(async {
        let mut channels = Vec::new();
        for _ in 0..GRPC_CHANNELS {
            channels.push(
                tonic::transport::Channel::from_shared(url.to_owned())
                    .map_err(|e| e.to_string())?
                    .connect()
                    .await
                    .map_err(|e| format!("connect to {url}: {e}"))?,
            );
        }
        let run = format!("{}", std::process::id());
        let started = tokio::time::Instant::now();
        let until = started + Duration::from_secs(u64::from(SECONDS));
        let tasks: Vec<_> = (0..CONNECTIONS)
            .map(|t| {
                let mut client = LedgerClient::new(channels[t as usize % channels.len()].clone());
                let run = run.clone();
                tokio::spawn(async move {
                    let mut n: u64 = 0;
                    let mut took = Vec::new();
                    while tokio::time::Instant::now() < until {
                        n += 1;
                        let sent = std::time::Instant::now();
                        let mut request = tonic::Request::new(DebitRequest {
                            // Each task debits accounts of its own: the
                            // ledger's transactions are optimistic, and two
                            // tasks on one account would conflict.
                            account: format!("acct-{t}-{}", n % 500),
                            amount: 1,
                        });
                        let key = format!("{run}-{t}-{n}");
                        request.metadata_mut().insert(
                            "idempotency-key",
                            key.parse().map_err(|_| "key".to_owned())?,
                        );
                        client
                            .debit(request)
                            .await
                            .map_err(|s| format!("a debit failed: {s:?}"))?;
                        took.push(sent.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok::<Vec<f64>, String>(took)
                })
            })
            .collect();
        let mut took = Vec::new();
        for task in tasks {
            took.extend(task.await.map_err(|e| e.to_string())??);
        }
        let calls = u64::try_from(took.len()).unwrap_or(u64::MAX);
        let rps = ticks_f64(calls) / started.elapsed().as_secs_f64();
        took.sort_by(f64::total_cmp);
        let at = |percent: usize| {
            took.get(took.len().saturating_sub(1) * percent / 100)
                .copied()
                .unwrap_or(f64::NAN)
        };
        Ok(Load {
            rps,
            p50: at(50),
            p99: at(99),
        })
    })
}

fn run_pg_pair(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let (naive, idem, schemas) = rt.block_on(pg_pair())?;
    let compared = compare(
        "postgres",
        ["INSERT + UPDATE (baseline)", "with idem (PgStore)"],
        [&naive, &idem],
        script,
        Some("postgres"),
    );
    // Requests cut off when wrk stops must not leave a session
    // inside a transaction (see PgStore::begin_transaction).
    let leaked: Result<Vec<String>, sqlx::Error> = rt.block_on(async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pool = idem_tests::pg_pool(1).await;
        sqlx::query_scalar(
            "SELECT left(query, 100) FROM pg_stat_activity WHERE datname = current_database() \
             AND state LIKE 'idle in transaction%' AND now() - state_change > interval '1 second'",
        )
        .fetch_all(&pool)
        .await
    });
    println!("  sessions left idle in a transaction: {leaked:?}");
    if let Err(e) = rt.block_on(pg_cleanup(&schemas)) {
        eprintln!("  could not drop the run's schemas: {e}");
    }
    compared
}

/// The memory run: the route without idem, the least design (the key
/// claimed in a map, the response recorded there), and idem on
/// `MemoryStore`: what idem costs beyond the least design is idem's own.
fn run_memory(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let (bare, naive, idem) = rt.block_on(async {
        let naive = naive_router(Naive {
            app: app(),
            keys: MemoryKeys::default(),
        });
        (
            idem_tests::serve(baseline::router(app())).await,
            idem_tests::serve(naive).await,
            idem_tests::serve(router(app())).await,
        )
    });
    compare(
        "memory",
        [
            "without idem",
            "claim + record in a map",
            "with idem (MemoryStore)",
        ],
        [&bare, &naive, &idem],
        script,
        None,
    )
}

/// idem against the `idempotent` crate's layer on their memory stores,
/// beside the route without either.
fn run_peer_memory(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let peer = peer::Peer::start(&["memory"])?;
    let (bare, idem) = rt.block_on(async {
        (
            idem_tests::serve(baseline::router(app())).await,
            idem_tests::serve(router(app())).await,
        )
    });
    compare_served(
        "peer",
        [
            "without idem",
            "idempotent 2.0 (memory)",
            "with idem (MemoryStore)",
        ],
        [&bare, &peer.url, &idem],
        [None, Some(peer.pid()), None],
        script,
        None,
    )
}

/// idem against the `idempotent` crate's layer on the same Redis, beside
/// the least design (`SET NX` + `SET`).
fn run_peer_redis(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let url = idem_tests::redis_url();
    let prefix = format!("idem-bench-{}-peer", std::process::id());
    let peer = peer::Peer::start(&["redis", &url, &prefix])?;
    let (naive, idem) = rt.block_on(redis_pair())?;
    let compared = compare_served(
        "peer-redis",
        [
            "SET NX + SET (baseline)",
            "idempotent 2.0 (Redis)",
            "with idem (RedisStore)",
        ],
        [&naive, &peer.url, &idem],
        [None, Some(peer.pid()), None],
        script,
        Some("redis-server"),
    );
    drop(peer);
    match rt.block_on(redis_cleanup_pattern(&format!("{prefix}*"))) {
        Ok(n) => println!("  deleted the peer's {n} keys from Redis"),
        Err(e) => eprintln!("  could not delete the peer's keys: {e}"),
    }
    match rt.block_on(redis_cleanup()) {
        Ok(n) => println!("  deleted the run's {n} keys from Redis"),
        Err(e) => eprintln!("  could not delete the run's keys: {e}"),
    }
    compared
}

/// The pairs on one Redis that `wanted` names.
fn run_redis_pairs(
    rt: &tokio::runtime::Runtime,
    wanted: &dyn Fn(&str) -> bool,
    script: &str,
    replay_script: &str,
) -> Result<(), String> {
    if wanted("redis") {
        run_redis_pair(rt, "redis", script)?;
    }
    if wanted("redis-floor") {
        run_redis_floor_trio(rt, script)?;
    }
    if wanted("redis-trace") {
        run_redis_trace_trio(rt, script)?;
    }
    if wanted("redis-layouts") {
        run_redis_layouts_trio(rt, script)?;
    }
    if wanted("redis-replay") {
        run_redis_replay_pair(rt, replay_script, false)?;
    }
    if wanted("redis-replay-cached") {
        run_redis_replay_pair(rt, replay_script, true)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass other
    // flags: only run the load when asked to benchmark.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "http_load: run with `cargo bench -p idem-tests --bench http_load [-- memory|peer|peer-redis|replay|redis|redis-floor|redis-replay|redis-replay-cached|redis-fenced|redis-replicated|actix|grpc|postgres|mariadb|sqlite|redis-own-core|redis-replicated-own-core]`"
        );
        return ExitCode::SUCCESS;
    }
    let only = args.iter().skip(1).find(|a| !a.starts_with('-')).cloned();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let script = std::env::temp_dir().join(format!("idem-http-load-{}.lua", std::process::id()));
    if let Err(e) = std::fs::write(&script, SCRIPT) {
        eprintln!("http_load: cannot write the wrk script: {e}");
        return ExitCode::FAILURE;
    }
    let script = script.to_string_lossy().into_owned();
    let replay_script = std::env::temp_dir().join(format!(
        "idem-http-load-{}-{REPLAY_SCRIPT_NAME}",
        std::process::id()
    ));
    if let Err(e) = std::fs::write(&replay_script, REPLAY_SCRIPT) {
        eprintln!("http_load: cannot write the wrk script: {e}");
        return ExitCode::FAILURE;
    }
    let replay_script = replay_script.to_string_lossy().into_owned();
    let result = (|| {
        // Not part of the default run: it changes CPU affinities while it runs.
        if only.as_deref() == Some("redis-own-core") {
            return redis_own_core(&rt, &script);
        }
        if only.as_deref() == Some("redis-replicated-own-core") {
            return redis_replicated_own_core(&rt, &script);
        }
        if wanted("memory") {
            run_memory(&rt, &script)?;
        }
        if wanted("peer") {
            run_peer_memory(&rt, &script)?;
        }
        if wanted("peer-redis") {
            run_peer_redis(&rt, &script)?;
        }
        if wanted("replay") {
            run_replay_pair(&rt, &replay_script)?;
        }
        run_redis_pairs(&rt, &wanted, &script, &replay_script)?;
        if wanted("redis-fenced") {
            run_redis_fenced_pair(&rt, &script)?;
        }
        if wanted("redis-replicated") {
            run_redis_replicated_pair(&rt, &script)?;
        }
        if wanted("actix") {
            let [bare, idem] = actix_pair();
            compare(
                "actix",
                ["actix-web without idem", "with idem_actix (memory)"],
                [&bare, &idem],
                &script,
                None,
            )?;
        }
        if wanted("grpc") {
            let urls = rt.block_on(grpc_pair())?;
            println!("grpc: payments.v1.Ledger/Debit, new key per call, {CONNECTIONS} concurrent tonic clients on {GRPC_CHANNELS} connections for {SECONDS}s, {ROUNDS} alternating rounds");
            compare_with(
                ["tonic without idem", "with idem_tonic (memory)"],
                None,
                |v| grpc_load(&rt, &urls[v]),
            )?;
        }
        if wanted("postgres") {
            run_pg_pair(&rt, &script)?;
        }
        if wanted("mariadb") {
            mysql_pair::run(&rt, &script)?;
        }
        if wanted("sqlite") {
            sqlite_pair::run(&rt, &script)?;
        }
        Ok::<(), String>(())
    })();
    let _ = std::fs::remove_file(&script);
    let _ = std::fs::remove_file(&replay_script);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http_load: {e}");
            ExitCode::FAILURE
        }
    }
}
