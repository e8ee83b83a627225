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
struct Order { sku: String }

/// The most common axum return type.
#[idempotent(ttl = "24h")]
async fn place(State(_app): State<App>, Json(order): Json<Order>) -> impl IntoResponse {
    (StatusCode::CREATED, Json(serde_json::json!({ "sku": order.sku })))
}

fn main() {
    let _: Router = Router::new().route("/orders", post(place)).with_state(app());
}
