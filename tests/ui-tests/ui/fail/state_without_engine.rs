use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use serde::{Deserialize, Serialize};

#[derive(Clone)]
struct App {
    fee: u64,
}

#[derive(Serialize, Deserialize)]
struct Debit {
    amount: u64,
}

#[idempotent]
async fn debit(State(app): State<App>, Json(req): Json<Debit>) -> String {
    (req.amount + app.fee).to_string()
}

fn main() {
    let _: Router = Router::new()
        .route("/debits", post(debit))
        .with_state(App { fee: 1 });
}
