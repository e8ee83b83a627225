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
use axum::Json;

#[derive(serde::Serialize, serde::Deserialize)]
struct Event { id: String, kind: String, data: serde_json::Value }

#[idempotent(key = event.id, name = "github-webhook")]
async fn github(State(_app): State<App>, Json(event): Json<Event>) -> String {
    format!("{} {}", event.kind, event.data)
}

fn main() {
    let _: Router = Router::new().route("/webhooks/github", post(github)).with_state(app());
}
