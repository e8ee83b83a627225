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
#[idempotent]
async fn note(State(_app): State<App>, body: String) -> String {
    body.to_uppercase()
}

fn main() {
    let _: Router = Router::new().route("/notes", post(note)).with_state(app());
}
