//! What a record costs in each store, and what a service needs: the
//! payments debit's record (its 201 response: `content-type` and a
//! 99-byte receipt) written N times to each store through its `Store`
//! implementation, then each store's own accounting read:
//!
//! - Redis (a server of its own, default prefix): `MEMORY USAGE` of record
//!   keys and of trace keys, and `used_memory` before and after, under
//!   each key layout;
//! - PostgreSQL: `pg_total_relation_size` of the table (rows, indexes,
//!   TOAST), written in rounds that autovacuum's work separates;
//! - MariaDB: `DATA_LENGTH + INDEX_LENGTH` after `ANALYZE TABLE`;
//! - memory: the process's resident memory before and after (allocator
//!   overhead included), and the store's own count (`MemoryStore::bytes`).
//!
//! Then what 1 000 and 10 000 first requests a second need with records
//! kept 24 hours and traces a day after (the defaults).
//!
//! `cargo bench -p idem-tests --bench capacity`

// Byte counts become averages: far below 2^52, no precision is lost.
#![allow(clippy::cast_precision_loss)]

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Call, Fingerprint, IdempotencyKey, MemoryStore, Outcome, Store};
use idem_redis::KeyLayout;
use idem_tests::{mysql_store, pg_store, PrivateRedis};
use sqlx::Row;

const DAY: Duration = Duration::from_hours(24);

/// The payments debit's recorded response, as the axum adapter records it.
fn debit_outcome(n: usize) -> Outcome {
    let body = format!(
        r#"{{"debit_id":"dbt_{:016x}_{}","account":"alice","amount":1000,"balance":9000}}"#,
        n as u64 * 0x9e37_79b9_7f4a_7c15,
        1_764_000_000_000_000u64 + n as u64
    );
    idem_http::encode(
        201,
        &[("content-type", b"application/json")],
        body.as_bytes(),
    )
}

fn call(n: usize) -> Call {
    Call::new(
        "account=alice",
        IdempotencyKey::parse(&format!("9b2f4c1e-7a3d-4e8b-a6c5-{n:012}")).expect("key"),
        Fingerprint::of("debit", &n).expect("fingerprint"),
    )
}

/// Writes records `from..to` to `store`, 16 at a time.
async fn fill(store: &(impl Store + Clone + 'static), from: usize, to: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..16 {
        let store = store.clone();
        tasks.spawn(async move {
            for n in (from + lane..to).step_by(16) {
                let c = call(n);
                let lease = match store
                    .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
                    .await
                {
                    Ok(Begin::Acquired(lease)) => lease,
                    other => panic!("record {n}: {other:?}"),
                };
                store
                    .complete(c.record_id(), &lease, &debit_outcome(n), DAY)
                    .await
                    .expect("complete");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("filler");
    }
}

fn info_field(info: &str, field: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

async fn used_memory(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(con)
        .await
        .expect("INFO");
    info_field(&info, "used_memory:")
}

async fn memory_usage(con: &mut redis::aio::MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(con)
        .await
        .expect("MEMORY USAGE")
}

/// (record, total per debit by `used_memory`) in bytes, for records
/// written under `layout`'s keys (default prefix). A record carries its
/// late-retry trace: one key a debit.
async fn redis_costs(n: usize, layout: KeyLayout) -> (f64, f64) {
    let server = PrivateRedis::start(false);
    let store = idem_redis::RedisStore::connect(&server.url())
        .await
        .expect("private redis")
        .with_key_layout(layout);
    let mut con = idem_tests::redis_connection(&server.url()).await;
    fill(&store, 0, 100).await;
    let before = used_memory(&mut con).await;
    fill(&store, 100, 100 + n).await;
    let after = used_memory(&mut con).await;
    let mut record = 0;
    for i in 100..1100 {
        let key = store.key(call(i).record_id());
        record += memory_usage(&mut con, &key).await;
    }
    (record as f64 / 1000.0, (after - before) as f64 / n as f64)
}

/// Bytes per row once autovacuum keeps up: written in ten rounds, each
/// vacuumed before the next (as autovacuum does, long before a table of a
/// day's records doubles), so that each round's rows reuse the space of the
/// previous round's first versions (a claim's row, updated by its
/// completion). Without the rounds, every row's dead first version would be
/// counted too, which a service only ever holds for minutes.
async fn postgres_cost(n: usize) -> f64 {
    let store = pg_store().await;
    let vacuum = format!("VACUUM ANALYZE \"{}\".records", store.schema());
    for round in 0..10 {
        fill(&store, round * n / 10, (round + 1) * n / 10).await;
        sqlx::query(sqlx::AssertSqlSafe(vacuum.clone()))
            .execute(store.pool())
            .await
            .expect("vacuum");
    }
    let size: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT pg_total_relation_size('\"{}\".records')",
        store.schema()
    )))
    .fetch_one(store.pool())
    .await
    .expect("size");
    size as f64 / n as f64
}

async fn mariadb_cost(n: usize) -> f64 {
    let store = mysql_store().await;
    fill(&store, 0, n).await;
    let table = store.table().to_owned();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE TABLE `{table}`")))
        .execute(store.pool())
        .await
        .expect("analyze");
    let row = sqlx::query(
        "SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
    )
    .bind(&table)
    .fetch_one(store.pool())
    .await
    .expect("size");
    let size: u64 = row.try_get(0).expect("bytes");
    size as f64 / n as f64
}

/// Bytes per row in a SQLite file (its pages, table and indexes, after a
/// checkpoint), beyond those of the first 1 000 rows. Written with
/// `synchronous = OFF`: how much a row takes does not depend on it.
async fn sqlite_cost(n: usize) -> f64 {
    let path = idem_tests::sqlite_path("capacity");
    let store = idem_sqlite::SqliteStore::open_with(
        sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Off),
    )
    .await
    .expect("sqlite");
    let pages = || async {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(store.pool())
            .await
            .expect("checkpoint");
        let count: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(store.pool())
            .await
            .expect("pages");
        let size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(store.pool())
            .await
            .expect("page size");
        count * size
    };
    fill(&store, 0, 1000).await;
    let before = pages().await;
    fill(&store, 1000, 1000 + n).await;
    let after = pages().await;
    store.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    (after - before) as f64 / n as f64
}

fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// (resident, counted) bytes per record.
async fn memory_costs(n: usize) -> (f64, f64) {
    let store = MemoryStore::builder().max_bytes(usize::MAX).build();
    fill(&store, 0, 1000).await;
    let (before, counted_before) = (resident_bytes(), store.bytes());
    fill(&store, 1000, 1000 + n).await;
    let (after, counted_after) = (resident_bytes(), store.bytes());
    (
        after.saturating_sub(before) as f64 / n as f64,
        (counted_after - counted_before) as f64 / n as f64,
    )
}

fn gib(bytes: f64) -> String {
    format!("{:.0} GiB", bytes / f64::from(1u32 << 30))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "the payments debit's record: {} bytes of recorded response",
        debit_outcome(0).len()
    );
    let (record, redis_total) = rt.block_on(redis_costs(100_000, KeyLayout::Hex));
    let (compact, compact_total) = rt.block_on(redis_costs(100_000, KeyLayout::Compact));
    let pg = rt.block_on(postgres_cost(50_000));
    let mariadb = rt.block_on(mariadb_cost(50_000));
    let sqlite = rt.block_on(sqlite_cost(50_000));
    let (resident, counted) = rt.block_on(memory_costs(200_000));
    println!("| store | bytes per record | bytes per trace | records per GiB |");
    println!("| --- | --- | --- | --- |");
    let per_gib = |b: f64| f64::from(1u32 << 30) / b;
    println!(
        "| Redis 7.0, compact keys, the default (`MEMORY USAGE`) | {compact:.0} | the record | {:.1} M |",
        per_gib(compact) / 1e6
    );
    println!(
        "| Redis 7.0, compact keys (`used_memory`) | {compact_total:.0} | the record | {:.1} M |",
        per_gib(compact_total) / 1e6
    );
    println!(
        "| Redis 7.0, hex keys (`MEMORY USAGE`) | {record:.0} | the record | {:.1} M |",
        per_gib(record) / 1e6
    );
    println!(
        "| Redis 7.0, hex keys (`used_memory`) | {redis_total:.0} | the record | {:.1} M |",
        per_gib(redis_total) / 1e6
    );
    println!(
        "| PostgreSQL 15 (`pg_total_relation_size`) | {pg:.0} | the row | {:.1} M |",
        per_gib(pg) / 1e6
    );
    println!(
        "| MariaDB 10.11 (`DATA_LENGTH + INDEX_LENGTH`) | {mariadb:.0} | the row | {:.1} M |",
        per_gib(mariadb) / 1e6
    );
    println!(
        "| SQLite 3.51 (the file's pages) | {sqlite:.0} | the row | {:.1} M |",
        per_gib(sqlite) / 1e6
    );
    println!(
        "| memory (resident; the store counts {counted:.0}) | {resident:.0} | the record | {:.1} M |",
        per_gib(resident) / 1e6
    );
    // Steady state, 24 h records and a day of traces after: every store
    // holds each record two days (the trace is the record, kept a day past
    // its replay).
    println!();
    println!(
        "| first requests a second | Redis (compact keys) | Redis, hex keys | PostgreSQL | MariaDB | SQLite | memory |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for rps in [1_000.0, 10_000.0] {
        let day = rps * 86_400.0;
        println!(
            "| {rps:.0} | {} | {} | {} | {} | {} | {} |",
            gib(2.0 * day * compact_total),
            gib(2.0 * day * redis_total),
            gib(2.0 * day * pg),
            gib(2.0 * day * mariadb),
            gib(2.0 * day * sqlite),
            gib(2.0 * day * resident),
        );
    }
}
