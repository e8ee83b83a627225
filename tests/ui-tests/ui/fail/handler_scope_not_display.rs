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

#[derive(Serialize, Deserialize)]
struct Account {
    id: u64,
}

#[idempotent(scope = "account")]
async fn debit(State(_app): State<App>, Json(account): Json<Account>) -> String {
    account.id.to_string()
}

fn main() {}
