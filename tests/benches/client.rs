//! The caller's half: the same POST sent with plain `reqwest`, through
//! `reqwest-middleware` with no middleware, and through `idem-client`'s
//! middleware (a key minted, the request cloned for a
//! possible retry, the answer annotated), in one run, against a local
//! server that answers 201 at once. The difference is the middleware's own
//! cost per call.
//!
//! `cargo bench -p idem-tests --bench client`

#![allow(missing_docs)]

use axum::http::StatusCode;
use axum::routing::post;
use criterion::{criterion_group, criterion_main, Criterion};
use idem_client::IdempotentRetries;

fn client_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let url = rt.block_on(idem_tests::serve(
        axum::Router::new().route("/orders", post(|| async { (StatusCode::CREATED, "ok") })),
    ));
    let url = format!("{url}/orders");
    let plain = reqwest::Client::new();
    let with_idem = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(IdempotentRetries::new())
        .build();
    let bare_middleware = reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).build();
    let mut group = c.benchmark_group("client_call");
    group.bench_function("plain_reqwest", |b| {
        b.to_async(&rt).iter(|| async {
            let answer = plain.post(&url).body("{}").send().await.expect("call");
            assert_eq!(answer.status(), StatusCode::CREATED);
            std::hint::black_box(answer.bytes().await.expect("body"));
        });
    });
    group.bench_function("reqwest_middleware_without_middleware", |b| {
        b.to_async(&rt).iter(|| async {
            let answer = bare_middleware
                .post(&url)
                .body("{}")
                .send()
                .await
                .expect("call");
            assert_eq!(answer.status(), StatusCode::CREATED);
            std::hint::black_box(answer.bytes().await.expect("body"));
        });
    });
    group.bench_function("with_idem_client", |b| {
        b.to_async(&rt).iter(|| async {
            let answer = with_idem.post(&url).body("{}").send().await.expect("call");
            assert_eq!(answer.status(), StatusCode::CREATED);
            std::hint::black_box(answer.bytes().await.expect("body"));
        });
    });
    group.finish();
}

/// Answers every request with 201 without sending it: the middleware's
/// own work, free of the network.
struct Canned;

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for Canned {
    async fn handle(
        &self,
        _req: reqwest::Request,
        _extensions: &mut http::Extensions,
        _next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let answer = http::Response::builder()
            .status(201)
            .body("ok")
            .expect("response");
        Ok(reqwest::Response::from(answer))
    }
}

fn middleware_alone(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let canned = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(Canned)
        .build();
    let with_idem = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(IdempotentRetries::new())
        .with(Canned)
        .build();
    let mut group = c.benchmark_group("middleware_alone");
    group.bench_function("canned_answer", |b| {
        b.to_async(&rt).iter(|| async {
            let answer = canned
                .post("http://127.0.0.1:9/orders")
                .body("{}")
                .send()
                .await;
            std::hint::black_box(answer.expect("canned"));
        });
    });
    group.bench_function("canned_answer_with_idem_client", |b| {
        b.to_async(&rt).iter(|| async {
            let answer = with_idem
                .post("http://127.0.0.1:9/orders")
                .body("{}")
                .send()
                .await;
            std::hint::black_box(answer.expect("canned"));
        });
    });
    group.finish();
}

criterion_group!(benches, client_overhead, middleware_alone);
criterion_main!(benches);
