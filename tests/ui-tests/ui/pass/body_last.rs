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
use axum::body::Body;

#[idempotent]
async fn upload(State(_app): State<App>, body: Body) -> String {
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    bytes.len().to_string()
}

fn main() {
    let _: Router = Router::new().route("/uploads", post(upload)).with_state(app());
}
