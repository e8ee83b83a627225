// An axum handler given idem-actix's attribute (an import copied from
// another service).
use axum::extract::{FromRef, Path, State};
use axum::response::IntoResponse;
use axum::Json;
use idem_actix::idempotent;
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

#[idempotent(scope = "account")]
async fn debit(
    State(_app): State<App>,
    Path(account): Path<String>,
    Json(req): Json<Debit>,
) -> impl IntoResponse {
    format!("{account} {}", req.amount)
}

fn main() {}
