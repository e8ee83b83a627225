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

#[idempotent]
#[axum::debug_handler]
async fn create(State(_app): State<App>, Json(name): Json<String>) -> String {
    name
}

fn main() {
    let _: Router = Router::new().route("/things", post(create)).with_state(app());
}
