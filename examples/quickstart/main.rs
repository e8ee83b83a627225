//! The README's quick start: an axum service whose charges run once per
//! `Idempotency-Key` and API key, on the in-memory store, with idem's
//! refusals in the service's own error format.
use axum::extract::{FromRef, State};
use axum::response::{IntoResponse, Response};
use axum::{routing::post, Json, Router};
use idem_axum::{idempotent, problem_format, Problem};
use idem_core::{Engine, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Serialize, Deserialize)]
struct Charge {
    amount: u64,
}

// Runs once per key and API key; a retry gets the first answer, byte for byte.
#[idempotent(ttl = "24h", scope = header("x-api-key"))]
async fn charge(State(_app): State<App>, Json(charge): Json<Charge>) -> Response {
    let receipt = serde_json::json!({"object": "charge", "amount": charge.amount});
    (axum::http::StatusCode::CREATED, Json(receipt)).into_response()
}

// idem's refusals (no key, a duplicate in flight, a reused key, ...) in the
// service's own error format.
fn error(problem: &Problem) -> Response {
    let body =
        serde_json::json!({"error": {"code": problem.kind().slug(), "message": problem.detail()}});
    (problem.status(), Json(body)).into_response()
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let app = Router::new()
        .route("/v1/charges", post(charge))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
        })
        .layer(problem_format(error));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(listener, app).await
}
