//! `Engine::run` on `MemoryStore` beside the same operation called bare, in
//! one run: a new key (begin + complete) and a replay (one begin). The
//! `idem` cases build the call (key, scope, fingerprint) as a handler would;
//! the `idem_call_built` cases leave that out, and measure the engine alone.
//! The `naive_map` cases are the least any key-claiming design does, as the
//! HTTP benchmark's baselines do on Redis and PostgreSQL: claim the key in a
//! map under a lock, run, record the result's JSON under the key (no
//! fingerprint, lease, fencing, expiry order or waking), with the key built
//! outside the measurement: the floor under `idem_call_built`.
//!
//! `cargo bench -p idem-core --bench engine`

#![allow(missing_docs)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use idem_core::{Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Never, Policy, Scope};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Debit {
    account: u64,
    amount: u64,
}

#[derive(Serialize, Deserialize)]
struct Receipt {
    debit: u64,
    account: u64,
    balance: u64,
}

/// The operation under test: what a handler does once it is allowed to run.
#[allow(clippy::unused_async)] // stands in for an async handler
async fn operation(req: &Debit, n: u64) -> Result<Receipt, Never> {
    Ok(Receipt {
        debit: n,
        account: req.account,
        balance: 10_000 - req.amount,
    })
}

fn call(req: &Debit, key: &str) -> Call {
    Call::new(
        Scope::new(req.account.to_string()),
        IdempotencyKey::parse(key).expect("valid key"),
        Fingerprint::of("debit", req).expect("fingerprint"),
    )
}

/// The naive design's records: a key claimed (`None`) or recorded (`Some`).
/// Cleared at a million keys, as the store's purge bounds its table.
#[derive(Default)]
struct NaiveMap(Mutex<HashMap<String, Option<Vec<u8>>>>);

impl NaiveMap {
    /// Claims `key`, or answers what it recorded (`Err(None)` while claimed).
    fn claim(&self, key: &str) -> Result<(), Option<Vec<u8>>> {
        let mut map = self.0.lock().expect("not poisoned");
        if let Some(found) = map.get(key) {
            return Err(found.clone());
        }
        if map.len() >= 1 << 20 {
            map.clear();
        }
        map.insert(key.to_owned(), None);
        Ok(())
    }

    fn record(&self, key: &str, bytes: Vec<u8>) {
        if let Some(slot) = self.0.lock().expect("not poisoned").get_mut(key) {
            *slot = Some(bytes);
        }
    }

    /// The naive design's run: claim, run, record; a replay decodes.
    async fn run(&self, key: &str, req: &Debit, n: u64) -> Result<Receipt, Never> {
        match self.claim(key) {
            Ok(()) => {
                let result = operation(req, n).await;
                let bytes = serde_json::to_vec(&result).expect("encodes");
                self.record(key, bytes);
                result
            }
            Err(Some(bytes)) => serde_json::from_slice(&bytes).expect("decodes"),
            Err(None) => panic!("claimed twice in a sequential bench"),
        }
    }
}

fn engine_vs_bare(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    // Completed records expire after 2s and are purged every second, so a long
    // run holds a steady number of records.
    let store = rt.block_on(async {
        MemoryStore::builder()
            .max_bytes(usize::MAX)
            .purge_interval(Some(Duration::from_secs(1)))
            .build()
    });
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_secs(2)));
    let req = Debit {
        account: 42,
        amount: 1000,
    };
    let counter = AtomicU64::new(0);

    let mut new_key = c.benchmark_group("new_key");
    new_key.bench_function("bare", |b| {
        b.to_async(&rt).iter(|| async {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            black_box(operation(black_box(&req), n).await)
        });
    });
    new_key.bench_function("idem", |b| {
        b.to_async(&rt).iter(|| async {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            let call = call(&req, &format!("key-{n}"));
            black_box(
                engine
                    .run(&call, |_| operation(&req, n))
                    .await
                    .expect("runs"),
            )
        });
    });
    // The engine's own part: the call (key, scope, fingerprint, record id)
    // is built outside the measurement.
    new_key.bench_function("idem_call_built", |b| {
        b.to_async(&rt).iter_batched(
            || {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                (call(&req, &format!("key-{n}")), n)
            },
            |(call, n)| {
                let (engine, req) = (&engine, &req);
                async move {
                    black_box(
                        engine
                            .run(&call, |_| operation(req, n))
                            .await
                            .expect("runs"),
                    )
                }
            },
            BatchSize::SmallInput,
        );
    });
    new_key.finish();

    let replayed = call(&req, "replayed-key");
    rt.block_on(async {
        let long = replayed.clone().ttl(Duration::from_hours(1));
        engine
            .run(&long, |_| operation(&req, 0))
            .await
            .expect("first run");
    });
    let mut replay = c.benchmark_group("replay");
    replay.bench_function("bare", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(operation(black_box(&req), 0).await) });
    });
    replay.bench_function("idem", |b| {
        b.to_async(&rt).iter(|| async {
            let call = call(&req, "replayed-key");
            let ran = engine
                .run(&call, |_| operation(&req, 0))
                .await
                .expect("replays");
            assert!(ran.is_replayed());
            black_box(ran)
        });
    });
    replay.bench_function("idem_call_built", |b| {
        b.to_async(&rt).iter(|| async {
            let ran = engine
                .run(&replayed, |_| operation(&req, 0))
                .await
                .expect("replays");
            assert!(ran.is_replayed());
            black_box(ran)
        });
    });
    replay.finish();
    naive_map(c, &rt, &req, &counter);
}

/// The least design's cases, `new_key/naive_map` and `replay/naive_map`.
fn naive_map(c: &mut Criterion, rt: &tokio::runtime::Runtime, req: &Debit, counter: &AtomicU64) {
    let naive = NaiveMap::default();
    let mut new_key = c.benchmark_group("new_key");
    new_key.bench_function("naive_map", |b| {
        b.to_async(rt).iter_batched(
            || {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                (format!("42:key-{n}"), n)
            },
            |(key, n)| {
                let naive = &naive;
                async move { black_box(naive.run(&key, req, n).await) }
            },
            BatchSize::SmallInput,
        );
    });
    new_key.finish();
    let replayed_key = "42:replayed-key";
    rt.block_on(naive.run(replayed_key, req, 0))
        .expect("first run");
    let mut replay = c.benchmark_group("replay");
    replay.bench_function("naive_map", |b| {
        b.to_async(rt)
            .iter(|| async { black_box(naive.run(replayed_key, req, 0).await) });
    });
    replay.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = engine_vs_bare
}
criterion_main!(benches);
