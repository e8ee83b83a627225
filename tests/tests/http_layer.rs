//! The HTTP semantics table (`http_semantics`) through idem-axum's
//! `IdempotencyLayer`.

mod http_semantics;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use http_semantics::{echo_body, echo_headers, Runs, SLOW};
use idem_axum::{IdempotencyLayer, RecordPolicy};
use idem_core::{Engine, IgnoredFields, Scope};
use idem_tests::serve;

async fn echo(State(runs): State<Runs>, body: Bytes) -> Response {
    let n = runs.next();
    let headers = echo_headers(n);
    (StatusCode::CREATED, headers, echo_body(&body, n)).into_response()
}

async fn slow(State(runs): State<Runs>) -> Response {
    runs.next();
    tokio::time::sleep(SLOW).await;
    (StatusCode::OK, "slow done").into_response()
}

async fn flaky(State(runs): State<Runs>) -> Response {
    let n = runs.next();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("attempt {n} failed"),
    )
        .into_response()
}

async fn big(State(runs): State<Runs>) -> Response {
    runs.next();
    vec![b'x'; 10_000].into_response()
}

fn start(
    engine: Engine,
    runs: Runs,
    record: RecordPolicy,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>> {
    let router = Router::new()
        .route("/echo", post(echo).get(|| async { "plain get" }))
        .route("/slow", post(slow))
        .route("/flaky", post(flaky))
        .route("/big", post(big))
        .with_state(runs)
        .layer(
            IdempotencyLayer::new(engine)
                .max_request_body(1024)
                .ignore_body_fields(IgnoredFields::new(["/sent_at"]).expect("pointer"))
                .max_response_body(4096)
                .record(record)
                .scope(|parts| {
                    Ok(parts
                        .headers
                        .get("x-tenant")
                        .and_then(|v| v.to_str().ok())
                        .map_or_else(Scope::global, Scope::new))
                }),
        );
    Box::pin(serve(router))
}

table!(http_semantics::Adapter {
    start,
    keeps_header_order: true,
    drops_on_fin: true,
});
