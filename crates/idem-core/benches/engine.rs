//! `Engine::run` on `MemoryStore` beside the same operation called bare, in
//! one run: a new key (begin + complete) and a replay (one begin). The
//! `idem` cases build the call (key, scope, fingerprint) as a handler would;
//! the `idem_call_built` cases leave that out, and measure the engine alone.
//!
//! `cargo bench -p idem-core --bench engine`

#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
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
        let long = replayed.clone().ttl(Duration::from_secs(3600));
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
