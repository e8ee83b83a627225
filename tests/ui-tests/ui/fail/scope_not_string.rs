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

#[idempotent(scope = account)]
async fn debit(State(_app): State<App>, Path(account): Path<String>, Json(req): Json<Debit>) -> String {
    format!("{account} {}", req.amount)
}

fn main() {}
