//! Load benchmark: the payments debit route with idem (memory store) against
//! the same route without idem, side by side in one run, driven by `wrk` over
//! 127.0.0.1 with a fresh `Idempotency-Key` on every request (every request
//! is a first request: one begin and one complete). The `memory` run has a
//! third server between the two: the same route claiming the key in a map
//! and recording the response there, the least any design does (the floor
//! under idem's cost).
//!
//! `cargo bench -p idem-tests --bench http_load [-- memory|redis|postgres|mariadb|sqlite|dynamodb|actix|grpc]` (needs `wrk`:
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
//! `UPDATE` in a file with the same settings; `-- dynamodb` idem on
//! DynamoDB (`DynamoStore`, on moto's server) against a conditional
//! `PutItem` + `PutItem`.
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

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::payments::{router, App, Ledger, MemoryLedger, PgLedger};
use idem_postgres::PgStore;

use crate::{
    framework_pairs::{actix_pair, grpc_load, grpc_pair, GRPC_CHANNELS},
    redis_pairs::{
        redis_cleanup, redis_cleanup_pattern, redis_pair, redis_replicated_own_core,
        run_redis_fenced_pair, run_redis_replicated_pair, PgKeys,
    },
    redis_runs::{
        redis_own_core, run_redis_floor_trio, run_redis_layouts_trio, run_redis_pair,
        run_redis_replay_pair, run_redis_trace_trio, run_replay_pair,
    },
    rounds::{compare, compare_served, compare_with},
    unfenced::Unfenced,
};

#[path = "common/baseline.rs"]
mod baseline;
#[path = "common/dynamodb_pair.rs"]
mod dynamodb_pair;
#[path = "common/fenced_floor.rs"]
mod fenced_floor;
#[path = "common/framework_pairs.rs"]
mod framework_pairs;
#[path = "common/mysql_pair.rs"]
mod mysql_pair;
#[path = "common/naive.rs"]
mod naive;
#[path = "common/peer.rs"]
mod peer;
#[path = "common/redis_pairs.rs"]
mod redis_pairs;
#[path = "common/redis_runs.rs"]
mod redis_runs;
#[path = "common/rounds.rs"]
mod rounds;
#[path = "common/sqlite_pair.rs"]
mod sqlite_pair;
#[path = "common/unfenced.rs"]
mod unfenced;
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
/// beside the route without either and the least design (the key claimed
/// and the answer recorded in a map): what 1.25× the peer asks, next to
/// the floor of any design that claims and records. All four run the same
/// handler; a fifth route runs idem on the payments example's own ledger,
/// which commits each debit with its record.
fn run_peer_memory(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let peer = peer::Peer::start(&["memory"])?;
    let (bare, naive, idem, fenced) = rt.block_on(async {
        let naive = naive_router(Naive {
            app: app(),
            keys: MemoryKeys::default(),
        });
        // The same handler as the other three: debit, answer, recorded by
        // the layer.
        let mut same = app();
        same.ledger = Arc::new(Unfenced(MemoryLedger::new(&MemoryStore::new())));
        (
            idem_tests::serve(baseline::router(app())).await,
            idem_tests::serve(naive).await,
            idem_tests::serve(router(same)).await,
            idem_tests::serve(router(app())).await,
        )
    });
    compare_served(
        "peer",
        [
            "without idem",
            "claim + record in a map",
            "idempotent 2.0 (memory)",
            "with idem (MemoryStore)",
            "idem, each debit committed with its record",
        ],
        [&bare, &naive, &peer.url, &idem, &fenced],
        [None, None, Some(peer.pid()), None, None],
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
            "http_load: run with `cargo bench -p idem-tests --bench http_load [-- memory|peer|peer-redis|replay|redis|redis-floor|redis-replay|redis-replay-cached|redis-fenced|redis-replicated|actix|grpc|postgres|mariadb|sqlite|dynamodb|redis-own-core|redis-replicated-own-core]`"
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
        if wanted("dynamodb") {
            dynamodb_pair::run(&rt, &script)?;
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
