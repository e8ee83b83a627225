use axum::extract::{FromRef, Path, State};
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(crate = "::idem_axm", ttl = "1h", scope = "account", claim = claim)]
async fn create(
    State(_app): State<App>,
    Path(account): Path<String>,
    Json(name): Json<String>,
) -> String {
    format!("{account} {name} {}", claim.fencing_token())
}

fn main() {
    let _: Router = Router::new()
        .route("/accounts/{account}/things", post(create))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
        });
}
