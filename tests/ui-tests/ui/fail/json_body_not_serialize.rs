use axum::extract::{FromRef, State};
use axum::Json;
use idem_axum::idempotent;
use idem_core::Engine;
use serde::Deserialize;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Deserialize)]
struct Debit {
    amount: u64,
}

#[idempotent]
async fn debit(State(_app): State<App>, Json(req): Json<Debit>) -> String {
    req.amount.to_string()
}

fn main() {}
