use axum::extract::{FromRef, Path, State};
use axum::Json;
use idem_axum::idempotent;
use idem_core::Engine;
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Serialize, Deserialize)]
struct Debit {
    amount: u64,
}

#[idempotent(on_conflict = "retry")]
async fn debit(State(_app): State<App>, Json(req): Json<Debit>) -> String {
    req.amount.to_string()
}

fn main() {}
