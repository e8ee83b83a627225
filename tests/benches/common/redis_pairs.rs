//! The Redis pairs' servers: the least design's keys (`SET NX` + `SET`),
//! idem on Redis in its layouts, traces and replay cache, fenced and
//! replicated, and the cleanup of a run's keys.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::payments::{router, Ledger, MemoryLedger, RedisLedger};
use idem_redis::{KeyLayout, RedisStore};

use crate::{
    app_on, app_with, fenced_floor, naive_router,
    rounds::{affinity, compare, set_affinity},
    unfenced::Unfenced,
    Naive, NaiveKeys,
};

/// Redis: `SET key "" NX PX` to claim, `SET key response PX` to record.
#[derive(Clone)]
pub(crate) struct RedisKeys {
    pub(crate) redis: redis::aio::ConnectionManager,
    pub(crate) prefix: String,
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
pub(crate) struct PgKeys {
    pub(crate) pool: sqlx::PgPool,
    pub(crate) claim_sql: Arc<str>,
    pub(crate) record_sql: Arc<str>,
    pub(crate) recorded_sql: Arc<str>,
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
pub(crate) async fn redis_pair_with(replay_cache: bool) -> Result<(String, String), String> {
    redis_pair_traced(replay_cache, idem_redis::DEFAULT_TRACE).await
}

/// The redis pair, records traced `trace` after they expire.
pub(crate) async fn redis_pair_traced(
    replay_cache: bool,
    trace: Duration,
) -> Result<(String, String), String> {
    redis_pair_laid_out(replay_cache, trace, KeyLayout::default()).await
}

/// The redis pair, new records under `layout`'s keys.
pub(crate) async fn redis_pair_laid_out(
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

pub(crate) async fn redis_pair() -> Result<(String, String), String> {
    redis_pair_with(false).await
}

/// idem on Redis with the balances in Redis too: each debit applied by the
/// ledger's own script and then recorded (`Unfenced`, the design before
/// issue 23), against each debit read and committed with its record in one
/// script call while the claim holds (`RedisTransaction`).
pub(crate) async fn redis_fenced_pair() -> Result<(String, String), String> {
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
pub(crate) async fn redis_replicated_pair(
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

pub(crate) fn run_redis_replicated_pair(
    rt: &tokio::runtime::Runtime,
    script: &str,
) -> Result<(), String> {
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
pub(crate) fn redis_replicated_own_core(
    rt: &tokio::runtime::Runtime,
    script: &str,
) -> Result<(), String> {
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

pub(crate) fn run_redis_fenced_pair(
    rt: &tokio::runtime::Runtime,
    script: &str,
) -> Result<(), String> {
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
pub(crate) fn compare_on_redis<const N: usize>(
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

pub(crate) async fn redis_cleanup() -> Result<u64, redis::RedisError> {
    redis_cleanup_pattern(&format!("idem-bench:{}:*", std::process::id())).await
}

/// Deletes the keys matching `pattern`.
pub(crate) async fn redis_cleanup_pattern(pattern: &str) -> Result<u64, redis::RedisError> {
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
