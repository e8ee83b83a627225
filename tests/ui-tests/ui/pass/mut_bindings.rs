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
struct Batch { items: Vec<u32> }

#[idempotent]
async fn sort(State(_app): State<App>, Json(mut batch): Json<Batch>) -> String {
    batch.items.sort_unstable();
    format!("{:?}", batch.items)
}

fn main() {
    let _: Router = Router::new().route("/sort", post(sort)).with_state(app());
}
