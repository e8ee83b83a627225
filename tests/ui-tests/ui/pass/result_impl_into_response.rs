use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::Router;
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

fn app() -> App {
    App { engine: Engine::new(MemoryStore::new()) }
}
use axum::{http::StatusCode, response::IntoResponse, Json};

#[derive(serde::Serialize, serde::Deserialize)]
struct Refund { amount: u64 }

#[idempotent]
async fn refund(State(_app): State<App>, Json(r): Json<Refund>) -> Result<impl IntoResponse, (StatusCode, String)> {
    if r.amount == 0 {
        return Err((StatusCode::BAD_REQUEST, "amount must be positive".to_owned()));
    }
    Ok((StatusCode::CREATED, format!("refunded {}", r.amount)))
}

fn main() {
    let _: Router = Router::new().route("/refunds", post(refund)).with_state(app());
}
