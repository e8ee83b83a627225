//! What each path of a request costs Redis, command by command: a first
//! request (begin on a new key, then complete), a replay, a duplicate in
//! flight, and a late retry of an expired record (refused from its trace).
//! Each path runs `N` times, 32 at once, through `RedisStore` on a private
//! `redis-server`; `INFO commandstats` is reset before each and read after:
//! the calls per request of every command (the client's `EVALSHA` and the
//! commands its script ran) and Redis's CPU per call (`usec_per_call`,
//! medians of 5 rounds), and Redis's whole CPU per request from `/proc`.
//!
//! `cargo bench -p idem-tests --bench redis_paths`

#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt as _};
use idem_core::store::Begin;
use idem_core::{Call, Lease, Outcome, Store};
use idem_redis::RedisStore;
use idem_tests::PrivateRedis;

/// Requests per path and round.
const N: u32 = 20_000;
const ROUNDS: usize = 5;
const AT_ONCE: usize = 32;
/// The payments debit's recorded answer is about this long.
const OUTCOME: usize = 126;

fn call(round: usize, path: &str, i: usize) -> Call {
    idem_tests::call(
        "account=acct-1",
        &format!("{}-{round}-{i}", path.replace(' ', "-")),
    )
}

async fn reset(con: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(con)
        .await
        .expect("RESETSTAT");
}

/// CPU ticks (user + system) of `pid` so far.
fn ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    field(11).unwrap_or(0) + field(12).unwrap_or(0)
}

/// Runs `one(i)` for every `i` in `0..N`, `AT_ONCE` at a time.
async fn each<F, Fut>(one: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    stream::iter(0..usize::try_from(N).unwrap_or(usize::MAX))
        .map(one)
        .buffer_unordered(AT_ONCE)
        .collect::<Vec<()>>()
        .await;
}

async fn claim(store: &RedisStore, c: &Call) -> Lease {
    match store
        .begin(c.record_id(), c.fingerprint(), Duration::from_mins(1))
        .await
    {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!("a new key is claimed: {other:?}"),
    }
}

async fn complete(store: &RedisStore, c: &Call, lease: &Lease, ttl: Duration) {
    store
        .complete(
            c.record_id(),
            lease,
            &Outcome::new(vec![b'r'; OUTCOME]),
            ttl,
        )
        .await
        .expect("complete");
}

/// One path, round `round`: prepares, resets the stats, runs it; returns
/// the stats and Redis's CPU microseconds per request.
async fn path(
    store: &RedisStore,
    con: &mut redis::aio::MultiplexedConnection,
    pid: u32,
    name: &str,
    round: usize,
) -> (BTreeMap<String, (u64, u64)>, f64) {
    let ttl = Duration::from_mins(10);
    let lease = Duration::from_mins(1);
    match name {
        "replay" | "late retry" => {
            let ttl = if name == "replay" {
                ttl
            } else {
                Duration::from_millis(1)
            };
            each(|i| async move {
                let c = call(round, name, i);
                let l = claim(store, &c).await;
                complete(store, &c, &l, ttl).await;
            })
            .await;
            // A late retry's record is past its replay.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        "duplicate" => {
            each(|i| async move {
                claim(store, &call(round, name, i)).await;
            })
            .await;
        }
        _ => {}
    }
    reset(con).await;
    let before = ticks(pid);
    each(|i| async move {
        let c = call(round, name, i);
        let answer = store.begin(c.record_id(), c.fingerprint(), lease).await;
        match (name, answer) {
            ("first request", Ok(Begin::Acquired(l))) => complete(store, &c, &l, ttl).await,
            ("replay", Ok(Begin::Replay(_)))
            | ("duplicate", Ok(Begin::InFlight { .. }))
            | ("late retry", Ok(Begin::Expired)) => {}
            (_, other) => panic!("{name}: {other:?}"),
        }
    })
    .await;
    // Ticks are 10 ms; a path's few seconds of Redis CPU are far below 2^32.
    let used = u32::try_from(ticks(pid) - before).unwrap_or(u32::MAX);
    let cpu = f64::from(used) * 1e4 / f64::from(N);
    let stats = idem_tests::redis_command_stats(con).await;
    (stats, cpu)
}

/// Each command's (calls per request, usec per call), one a round.
type Rounds = BTreeMap<String, Vec<(f64, f64)>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("redis_paths: run with `cargo bench -p idem-tests --bench redis_paths`");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let server = PrivateRedis::start(false);
    let pid = server.pid();
    rt.block_on(async {
        let store = RedisStore::connect(&server.url()).await.expect("redis");
        let store = Arc::new(store);
        let mut con = idem_tests::redis_connection(&server.url()).await;
        let paths = ["first request", "replay", "duplicate", "late retry"];
        // path -> command -> (calls per request, usec per call) per round.
        let mut seen: BTreeMap<&str, Rounds> = BTreeMap::new();
        let mut cpu: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for round in 0..ROUNDS {
            for name in paths {
                let (stats, per_request) = path(&store, &mut con, pid, name, round).await;
                for (command, (calls, usec)) in stats {
                    // Counts of a few seconds' calls are far below 2^32.
                    let calls = f64::from(u32::try_from(calls).unwrap_or(u32::MAX));
                    let usec = f64::from(u32::try_from(usec).unwrap_or(u32::MAX));
                    seen.entry(name)
                        .or_default()
                        .entry(command)
                        .or_default()
                        .push((calls / f64::from(N), usec / calls.max(1.0)));
                }
                cpu.entry(name).or_default().push(per_request);
            }
        }
        println!("{N} requests a path, {AT_ONCE} at once, medians of {ROUNDS} rounds");
        println!("| path | command | calls a request | Redis CPU per call | Redis CPU a request (all, `/proc`) |");
        println!("| --- | --- | --- | --- | --- |");
        for name in paths {
            let whole = median(cpu.remove(name).unwrap_or_default());
            for (command, rounds) in seen.remove(name).unwrap_or_default() {
                let calls = median(rounds.iter().map(|r| r.0).collect());
                let usec = median(rounds.iter().map(|r| r.1).collect());
                if calls < 0.01 {
                    // Loading the scripts, once.
                    continue;
                }
                println!("| {name} | `{command}` | {calls:.2} | {usec:.2} us | {whole:.1} us |");
            }
        }
    });
}
