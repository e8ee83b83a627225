//! An axum handler: key from the header, engine from the state, scope from
//! the path, the JSON body fingerprinted, the response recorded.

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    fee: u64,
}

#[derive(Serialize, Deserialize)]
struct Debit {
    amount: u64,
}

#[derive(Serialize)]
struct Receipt {
    amount: u64,
}

#[idempotent(ttl = "24h", lease = "30s", scope = "account", on_conflict = "wait(5s)", name = "debit-v1", claim = claim)]
async fn debit(
    State(app): State<App>,
    Path(account): Path<String>,
    Json(req): Json<Debit>,
) -> Result<(StatusCode, Json<Receipt>), (StatusCode, String)> {
    let _ = (account, claim.fencing_token());
    if req.amount == 0 {
        return Err((StatusCode::BAD_REQUEST, "amount must be positive".into()));
    }
    Ok((StatusCode::CREATED, Json(Receipt { amount: req.amount + app.fee })))
}

#[idempotent]
async fn ping() -> &'static str {
    "pong"
}

fn main() {
    let _router: Router = Router::new()
        .route("/accounts/{account}/debits", post(debit))
        .route("/ping", post(ping))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
            fee: 0,
        });
}
