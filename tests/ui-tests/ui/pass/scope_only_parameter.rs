// A parameter used only as the scope is no unused variable.
#![deny(unused)]

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
struct Charge {
    amount: u64,
}

#[idempotent(ttl = "24h", scope = "account")]
async fn charge(
    State(_app): State<App>,
    Path(account): Path<String>,
    Json(charge): Json<Charge>,
) -> String {
    format!("charged {}", charge.amount)
}

fn main() {
    let _ = axum::Router::<App>::new().route("/accounts/{account}/charges", axum::routing::post(charge));
}
