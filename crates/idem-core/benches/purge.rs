//! The memory store's purge: what one pass costs while nothing has expired
//! (the common case between expiries) and when a batch of records has.
//! The periodic purge runs on a runtime worker, so its cost is time that
//! worker's other tasks wait.
//!
//! `cargo bench -p idem-core --bench purge`

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use idem_core::memory::ManualClock;
use idem_core::store::Begin;
use idem_core::{Fingerprint, IdempotencyKey, MemoryStore, Outcome, RecordId, Scope, Store};

const START_US: u64 = 1_700_000_000_000_000;
const TTL: Duration = Duration::from_hours(1);

/// A store holding `n` completed records (and `in_flight` claims) that
/// expire after [`TTL`], on a clock the bench moves.
fn filled(
    rt: &tokio::runtime::Runtime,
    n: usize,
    in_flight: usize,
) -> (MemoryStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START_US));
    let store = MemoryStore::builder()
        .max_bytes(usize::MAX)
        .purge_interval(None)
        .clock(Arc::clone(&clock))
        .build();
    let scope = Scope::new("bench");
    let fingerprint = Fingerprint::from_bytes([7; 32]);
    let outcome = Outcome::new(vec![b'x'; 64]);
    rt.block_on(async {
        for i in 0..n + in_flight {
            let key = IdempotencyKey::parse(&format!("k-{i}")).expect("key");
            let id = RecordId::new(&scope, &key);
            let Ok(Begin::Acquired(lease)) = store.begin(&id, &fingerprint, TTL).await else {
                panic!("a new key is acquired");
            };
            if i < n {
                store
                    .complete(&id, &lease, &outcome, TTL)
                    .await
                    .expect("complete");
            }
        }
    });
    (store, clock)
}

fn purge(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("purge");

    let (store, _clock) = filled(&rt, 1_000_000, 64);
    group.bench_function("nothing_expired/1M", |b| {
        b.iter(|| assert_eq!(store.purge_expired(), 0));
    });
    drop(store);

    group.sample_size(10);
    group.bench_function("all_expired/100k", |b| {
        b.iter_batched(
            || {
                let (store, clock) = filled(&rt, 100_000, 0);
                clock.advance(TTL + Duration::from_secs(1));
                store
            },
            |store| {
                assert_eq!(store.purge_expired(), 100_000);
                store
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = purge
}
criterion_main!(benches);
