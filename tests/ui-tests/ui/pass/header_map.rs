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
use axum::http::HeaderMap;
use axum::Json;

#[idempotent]
async fn charge(State(_app): State<App>, headers: HeaderMap, Json(body): Json<serde_json::Value>) -> String {
    format!("{} {}", headers.len(), body)
}

fn main() {
    let _: Router = Router::new().route("/charges", post(charge)).with_state(app());
}
