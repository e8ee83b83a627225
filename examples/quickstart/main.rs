//! The README's quick start: an axum service whose charges run once per
//! `Idempotency-Key`, on the in-memory store.
use axum::extract::{FromRef, Path, State};
use axum::{routing::post, Json, Router};
use idem_axum::idempotent;
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

// Runs once per key and account; a retry gets the first answer, byte for byte.
#[idempotent(ttl = "24h", scope = "account")]
async fn charge(
    State(_app): State<App>,
    Path(account): Path<String>,
    Json(charge): Json<Charge>,
) -> String {
    format!("charged {} to {account}\n", charge.amount)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let app = Router::new()
        .route("/accounts/{account}/charges", post(charge))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(listener, app).await
}
