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
use axum::extract::{Path, Request};

/// A proxy-like handler that consumes the whole request last.
#[idempotent(scope = "tenant")]
async fn forward(State(_app): State<App>, Path(tenant): Path<String>, request: Request) -> String {
    format!("{tenant} {}", request.uri())
}

fn main() {
    let _: Router = Router::new().route("/tenants/{tenant}/forward", post(forward)).with_state(app());
}
