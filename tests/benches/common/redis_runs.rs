//! The Redis runs: each pair, trio and replay comparison on Redis, and the
//! run with Redis on a core of its own.

use std::time::Duration;

use idem_core::MemoryStore;
use idem_examples::payments::router;
use idem_redis::KeyLayout;

use crate::{
    app, app_on, baseline,
    fenced_floor::FencedKeys,
    naive_router, record_replays,
    redis_pairs::{
        compare_on_redis, redis_pair, redis_pair_laid_out, redis_pair_traced, redis_pair_with,
    },
    rounds::{affinity, compare, median, set_affinity},
    MemoryKeys, Naive,
};

/// The pid of the Redis server the benchmark talks to, from `INFO server`.
pub(crate) async fn redis_pid() -> Result<u32, String> {
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
pub(crate) fn run_redis_pair(
    rt: &tokio::runtime::Runtime,
    label: &str,
    script: &str,
) -> Result<(), String> {
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
pub(crate) fn run_redis_floor_trio(
    rt: &tokio::runtime::Runtime,
    script: &str,
) -> Result<(), String> {
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
            keys: FencedKeys::new(redis, format!("idem-bench:{}:fenced:", std::process::id())),
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

pub(crate) fn run_redis_trace_trio(
    rt: &tokio::runtime::Runtime,
    script: &str,
) -> Result<(), String> {
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
pub(crate) fn run_redis_layouts_trio(
    rt: &tokio::runtime::Runtime,
    script: &str,
) -> Result<(), String> {
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
pub(crate) fn run_replay_pair(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
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
pub(crate) fn run_redis_replay_pair(
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
pub(crate) async fn redis_round_trip() -> Result<f64, String> {
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
pub(crate) fn redis_own_core(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
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
