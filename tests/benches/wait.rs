//! How soon a duplicate that waits (`OnInFlight::Wait`) gets the first
//! request's answer once it is recorded: 100 waiters, real clock, each store
//! woken (`MemoryStore` in process, `PgStore` by `LISTEN`/`NOTIFY`,
//! `RedisStore` by pub/sub, `MySqlStore` by its own process's completions)
//! against
//! the same store polled (the engine's backoff, 5 ms doubling to 250 ms),
//! side by side, 9 alternating rounds.
//!
//! `cargo bench -p idem-tests --bench wait`

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{
    Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Never, OnInFlight, RecordId, Store,
};
use idem_tests::{Hooked, Hooks};

/// Hooks that make a store one that cannot wake: the engine polls it.
struct Polled;

impl Hooks for Polled {
    fn wakes(&self) -> bool {
        false
    }
}

/// One round: the holder works 100 ms; 100 duplicates wait. The delay of
/// each duplicate's answer after the holder's result was recorded, in µs.
async fn round(engine: &Engine, n: usize) -> Vec<u64> {
    let call = Call::new(
        "bench",
        IdempotencyKey::parse(&format!("wait-{n}")).expect("key"),
        Fingerprint::of("wait", &n).expect("fingerprint"),
    )
    .on_in_flight(OnInFlight::Wait {
        max: Duration::from_secs(5),
    });
    let done = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let holder = tokio::spawn({
        let (engine, call, done) = (engine.clone(), call.clone(), Arc::clone(&done));
        async move {
            let ran = engine
                .run(&call, |_| async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<_, Never>(1)
                })
                .await;
            // Recorded when `run` returns.
            *done.lock().expect("lock") = Some(Instant::now());
            ran
        }
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    let waiters: Vec<_> = (0..100)
        .map(|_| {
            let (engine, call) = (engine.clone(), call.clone());
            tokio::spawn(async move {
                let answer = engine.run(&call, |_| async { Ok::<_, Never>(2) }).await;
                assert!(matches!(answer, Ok(r) if r.is_replayed()), "a replay");
                Instant::now()
            })
        })
        .collect();
    let _ = holder.await;
    let recorded = done.lock().expect("lock").expect("recorded");
    let mut delays = Vec::new();
    for w in waiters {
        let at = w.await.expect("waiter");
        delays.push(
            u64::try_from(at.saturating_duration_since(recorded).as_micros()).unwrap_or(u64::MAX),
        );
    }
    delays
}

/// The value at `per_mille` thousandths of the sorted samples.
fn percentile(sorted: &[u64], per_mille: usize) -> u64 {
    let i = (sorted.len().saturating_sub(1) * per_mille).div_ceil(1000);
    sorted.get(i).copied().unwrap_or_default()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        pair(
            "memory",
            Engine::new(MemoryStore::new()),
            Engine::new(Hooked::new(Arc::new(MemoryStore::new()), Polled)),
        )
        .await;
        let woken = idem_tests::pg_store().await;
        // Bring the wake channel up first, as a running service has it.
        for _ in 0..5 {
            woken
                .changed(&RecordId::from_bytes([7; 32]), Duration::from_millis(50))
                .await;
        }
        let polled = Hooked::new(Arc::new(idem_tests::pg_store().await), Polled);
        pair("postgres", Engine::new(woken), Engine::new(polled)).await;
        let redis = || async {
            idem_redis::RedisStore::connect(&idem_tests::redis_url())
                .await
                .expect("redis")
                .with_prefix(&idem_tests::unique_prefix("wait-bench"))
        };
        let woken = redis().await;
        for _ in 0..5 {
            woken
                .changed(&RecordId::from_bytes([7; 32]), Duration::from_millis(50))
                .await;
        }
        pair(
            "redis",
            Engine::new(woken),
            Engine::new(Hooked::new(Arc::new(redis().await), Polled)),
        )
        .await;
        // MariaDB has no LISTEN: the store wakes waiters of its own process
        // (here, where the holder runs) and the engine polls for the rest;
        // `Polled` is what waiters on another instance get.
        pair(
            "mariadb",
            Engine::new(idem_tests::mysql_store().await),
            Engine::new(Hooked::new(
                Arc::new(idem_tests::mysql_store().await),
                Polled,
            )),
        )
        .await;
    });
}

async fn pair(name: &str, woken: Engine, polled: Engine) {
    let (mut w, mut p) = (Vec::new(), Vec::new());
    for n in 0..9 {
        w.extend(round(&woken, n).await);
        p.extend(round(&polled, 100 + n).await);
    }
    w.sort_unstable();
    p.sort_unstable();
    println!("{name}, 100 waiters x 9 rounds, delay from the first result being recorded to a waiter's answer:");
    println!(
        "  woken:  median {} us, p99 {} us",
        percentile(&w, 500),
        percentile(&w, 990)
    );
    println!(
        "  polled: median {} us, p99 {} us",
        percentile(&p, 500),
        percentile(&p, 990)
    );
}
