//! The payments debit route called in process (no sockets, no `wrk`), with
//! idem on `MemoryStore` beside the same route without idem, in one run: the
//! CPU cost of the HTTP layer, the engine and the store per request, free of
//! the network's noise. Every request carries a new key (begin, run, record).
//! `debit_route` also runs the least design between the two (the key
//! claimed in a map, the response recorded there: `common/naive.rs`), and
//! idem with the payments example's own ledger, which commits each debit
//! with its record.
//!
//! `cargo bench -p idem-tests --bench router`

#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use criterion::{criterion_group, criterion_main, Criterion};
use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::payments::{router, App, MemoryLedger};

#[path = "common/baseline.rs"]
mod baseline;
#[path = "common/naive.rs"]
mod naive;
#[path = "common/unfenced.rs"]
mod unfenced;
use naive::{naive_router, MemoryKeys, Naive};
use tower::ServiceExt;
use unfenced::Unfenced;

fn app() -> App {
    // Records live 2 seconds and are purged every second, so a long run
    // holds a steady number of them.
    app_with_ttl(Duration::from_secs(2))
}

fn app_with_ttl(ttl: Duration) -> App {
    let store = MemoryStore::builder()
        .max_bytes(usize::MAX)
        .purge_interval(Some(Duration::from_secs(1)))
        .build();
    App {
        engine: Engine::new(store.clone()).with_policy(Policy::default().ttl(ttl)),
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: Duration::ZERO,
        provider: None,
    }
}

fn debit(n: u64) -> Request<Body> {
    debit_with_key(n, &format!("bench-{n}"))
}

fn debit_with_key(n: u64, key: &str) -> Request<Body> {
    Request::post(format!("/accounts/acct-{}/debits", n % 500))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(r#"{"amount":1}"#))
        .expect("request")
}

async fn send(router: &Router, n: u64) {
    send_request(router, debit(n)).await;
}

/// A retry of one of 500 recorded debits (on the bare route, a debit).
async fn send_retry(router: &Router, n: u64) {
    send_request(router, debit_with_key(n, &format!("replay-{}", n % 500))).await;
}

async fn send_request(router: &Router, request: Request<Body>) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::CREATED);
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .expect("body");
    std::hint::black_box(body);
}

fn debit_route(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (bare, naive, idem, fenced) = rt.block_on(async {
        let naive = naive_router(Naive {
            app: app(),
            keys: MemoryKeys::default(),
        });
        // The same handler as the two before: debit, answer, recorded by
        // the layer.
        let mut same = app();
        same.ledger = Arc::new(Unfenced(MemoryLedger::new(&MemoryStore::new())));
        (baseline::router(app()), naive, router(same), router(app()))
    });
    let counter = AtomicU64::new(0);
    let mut group = c.benchmark_group("debit_route");
    group.bench_function("without_idem", |b| {
        b.to_async(&rt)
            .iter(|| send(&bare, counter.fetch_add(1, Ordering::Relaxed)));
    });
    // The least design: claim the key in a map, debit, record the response.
    group.bench_function("claim_record_in_a_map", |b| {
        b.to_async(&rt)
            .iter(|| send(&naive, counter.fetch_add(1, Ordering::Relaxed)));
    });
    group.bench_function("with_idem", |b| {
        b.to_async(&rt)
            .iter(|| send(&idem, counter.fetch_add(1, Ordering::Relaxed)));
    });
    // The payments example's own ledger: each debit committed with its
    // record while the claim holds.
    group.bench_function("with_idem_debit_committed_with_record", |b| {
        b.to_async(&rt)
            .iter(|| send(&fenced, counter.fetch_add(1, Ordering::Relaxed)));
    });
    group.finish();
}

/// The same 500 debits over and over: with idem every answer is a replay
/// from memory, without it every request debits (issue 27's goal: a replay
/// no slower than the bare route).
fn replay_route(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (bare, naive, idem) = rt.block_on(async {
        // Recorded for the whole run.
        let idem = router(app_with_ttl(Duration::from_hours(1)));
        let naive = naive_router(Naive {
            app: app(),
            keys: MemoryKeys::default(),
        });
        for n in 0..500 {
            send_retry(&idem, n).await;
            send_retry(&naive, n).await;
        }
        (baseline::router(app()), naive, idem)
    });
    let counter = AtomicU64::new(0);
    let mut group = c.benchmark_group("replay_route");
    group.bench_function("without_idem", |b| {
        b.to_async(&rt)
            .iter(|| send_retry(&bare, counter.fetch_add(1, Ordering::Relaxed)));
    });
    // The least design's retry: the body it recorded, from its map.
    group.bench_function("claim_record_in_a_map", |b| {
        b.to_async(&rt)
            .iter(|| send_retry(&naive, counter.fetch_add(1, Ordering::Relaxed)));
    });
    group.bench_function("with_idem", |b| {
        b.to_async(&rt)
            .iter(|| send_retry(&idem, counter.fetch_add(1, Ordering::Relaxed)));
    });
    group.finish();
}

/// A route that answers 201 at once, bare, behind
/// `map_response(problem_json)`, and behind tower's `Identity` layer, which
/// does nothing: what the problem+json layer costs a response that is not an
/// error (issue 27's goal: nothing) beside what any layer a router takes
/// costs (axum boxes the layered route and its future).
fn problem_json_layer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let route = || {
        Router::new().route(
            "/orders",
            axum::routing::post(|| async { StatusCode::CREATED }),
        )
    };
    let bare = route();
    let layered = route().layer(axum::middleware::map_response(idem_axum::problem_json));
    let identity = route().layer(tower::layer::util::Identity::new());
    let call = |router: &Router| {
        let router = router.clone();
        async move {
            let request = Request::post("/orders")
                .body(Body::empty())
                .expect("request");
            let response = router.oneshot(request).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::CREATED);
            std::hint::black_box(response);
        }
    };
    let mut group = c.benchmark_group("problem_json_layer");
    group.bench_function("bare_route", |b| {
        b.to_async(&rt).iter(|| call(&bare));
    });
    group.bench_function("with_problem_json", |b| {
        b.to_async(&rt).iter(|| call(&layered));
    });
    group.bench_function("with_identity_layer", |b| {
        b.to_async(&rt).iter(|| call(&identity));
    });
    group.finish();
}

criterion_group!(benches, debit_route, replay_route, problem_json_layer);
criterion_main!(benches);
