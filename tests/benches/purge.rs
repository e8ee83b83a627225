//! PostgreSQL's purge at scale: a table of ten million records (the
//! payments debit's, 151 bytes of recorded response each) whose deadlines
//! pass at 10 000 a second, purged by `PgStore::spawn_purger` beside a
//! steady load of first requests (begin and complete, 8 workers paced to
//! 800 a second); alternating rounds with the purger on and off (before a
//! round with it on, what expired in the round before is drained, untimed:
//! the rounds measure the steady state), the first requests' latency side
//! by side, and whether the purge keeps up (the rows past their deadline
//! left at the end of each purge round).
//!
//! `cargo bench -p idem-tests --bench purge` (`PURGE_ROWS` to change the
//! table's size; about eight minutes and 6 GB of disk at the default).

// Counts and latencies become ratios and ranks: far below 2^52.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::store::Begin;
use idem_core::{Call, Fingerprint, IdempotencyKey, Outcome, Store};
use idem_postgres::PgStore;
use idem_tests::pg_store;

/// Expiries a second.
const RATE: u64 = 10_000;
/// First requests a second, over all workers.
const LOAD: u64 = 800;
const WORKERS: u64 = 8;
const ROUND: Duration = Duration::from_secs(20);
const ROUNDS: usize = 6;

fn outcome() -> Outcome {
    idem_http::encode(
        201,
        &[("content-type", b"application/json")],
        br#"{"debit_id":"dbt_6a1c0e5b9f2d4c3a_1764000000000001","account":"alice","amount":1000,"balance":9000}"#,
    )
}

/// Loads `rows` completed records whose deadlines pass at `RATE` a
/// second, the first `lead` from now.
async fn load(store: &PgStore, rows: u64, lead: Duration) {
    let t = format!("\"{}\".records", store.schema());
    let chunk = 500_000;
    let mut from = 0;
    while from < rows {
        let to = (from + chunk).min(rows);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {t} (id, fingerprint, token, completed, deadline, outcome) \
             SELECT sha256(int8send(i)), sha256(int8send(-i)), 1, true, \
                    now() + $3 * interval '1 millisecond' \
                          + (i::float8 / $4) * interval '1 second', $5 \
             FROM generate_series($1::bigint, $2::bigint - 1) AS i"
        )))
        .bind(i64::try_from(from).unwrap_or(i64::MAX))
        .bind(i64::try_from(to).unwrap_or(i64::MAX))
        .bind(i64::try_from(lead.as_millis()).unwrap_or(i64::MAX))
        .bind(RATE as f64)
        .bind(outcome().as_bytes())
        .execute(store.pool())
        .await
        .expect("load");
        from = to;
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM ANALYZE {t}")))
        .execute(store.pool())
        .await
        .expect("vacuum");
}

/// Rows past their deadline, not yet purged.
async fn backlog(store: &PgStore) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".records WHERE deadline < clock_timestamp()",
        store.schema()
    )))
    .fetch_one(store.pool())
    .await
    .expect("backlog")
}

/// One round of paced first requests; their latencies in µs.
async fn first_requests(store: &PgStore, round: usize) -> Vec<u64> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let interval = Duration::from_micros(1_000_000 * WORKERS / LOAD);
    for w in 0..WORKERS {
        let store = store.clone();
        let stop = Arc::clone(&stop);
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                n += 1;
                let key = format!("r{round}-w{w}-{n}");
                let c = Call::new(
                    "purge",
                    IdempotencyKey::parse(&key).expect("key"),
                    Fingerprint::of("debit", &key).expect("fingerprint"),
                );
                let start = Instant::now();
                let Ok(Begin::Acquired(lease)) = store
                    .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
                    .await
                else {
                    continue;
                };
                if store
                    .complete(c.record_id(), &lease, &outcome(), Duration::from_hours(1))
                    .await
                    .is_ok()
                {
                    latencies.push(u64::try_from(start.elapsed().as_micros()).unwrap_or(0));
                }
            }
            latencies
        });
    }
    tokio::time::sleep(ROUND).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.expect("worker"));
    }
    all.sort_unstable();
    all
}

fn at(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn main() {
    let rows: u64 = std::env::var("PURGE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // No traces: a row is purgeable once its deadline passes.
        let store = pg_store().await.with_expired_trace(Duration::ZERO);
        let started = Instant::now();
        // Deadlines start passing once the table is loaded (about ten
        // seconds a million rows here).
        let lead = Duration::from_micros(rows * 15) + Duration::from_secs(20);
        load(&store, rows, lead).await;
        println!("{rows} rows loaded in {:?}", started.elapsed());
        while backlog(&store).await == 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // The purger on a connection of its own, as a service would size its
        // pool for its requests and one purge.
        let purging_store = PgStore::new(idem_tests::pg_pool(1).await)
            .with_schema(store.schema())
            .expect("schema")
            .with_expired_trace(Duration::ZERO);
        let deleted = Arc::new(AtomicU64::new(0));
        let (mut off_p50, mut off_p99, mut on_p50, mut on_p99) = (vec![], vec![], vec![], vec![]);
        for round in 0..ROUNDS {
            let purging = round % 2 == 1;
            if purging {
                // What expired during the round without a purge is drained
                // first, untimed: the round measures the steady state.
                while purging_store.purge_expired(5_000).await.expect("drain") == 5_000 {}
            }
            let purger = purging.then(|| {
                let store = purging_store.clone();
                let deleted = Arc::clone(&deleted);
                tokio::spawn(async move {
                    loop {
                        match store.purge_expired(5_000).await {
                            Ok(n) => {
                                deleted.fetch_add(n, Ordering::Relaxed);
                                if n < 5_000 {
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                }
                            }
                            Err(e) => panic!("purge: {e}"),
                        }
                    }
                })
            });
            let before = deleted.load(Ordering::Relaxed);
            let latencies = first_requests(&store, round).await;
            if let Some(p) = purger {
                p.abort();
            }
            let (p50, p99) = (at(&latencies, 0.5), at(&latencies, 0.99));
            let left = backlog(&store).await;
            println!(
                "round {round} purge {}: {} first requests, p50 {p50} µs, p99 {p99} µs; purged {}; past their deadline now {left}",
                if purging { "on " } else { "off" },
                latencies.len(),
                deleted.load(Ordering::Relaxed) - before,
            );
            if purging {
                on_p50.push(p50);
                on_p99.push(p99);
            } else {
                off_p50.push(p50);
                off_p99.push(p99);
            }
        }
        let (off50, off99, on50, on99) = (
            median(off_p50),
            median(off_p99),
            median(on_p50),
            median(on_p99),
        );
        println!(
            "medians: purge off p50 {off50} µs p99 {off99} µs; purge on p50 {on50} µs p99 {on99} µs; p99 ratio {:.2}",
            on99 as f64 / off99.max(1) as f64
        );
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{}\" CASCADE",
            store.schema()
        )))
        .execute(store.pool())
        .await;
    });
}
