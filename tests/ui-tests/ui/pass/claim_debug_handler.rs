//! `#[debug_handler]` checks the user's own signature, also with
//! `claim = ...` (the claim is not a parameter of it).
use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(claim = claim)]
#[axum::debug_handler]
async fn create(State(_app): State<App>, Json(name): Json<String>) -> String {
    format!("{name} under token {}", claim.fencing_token())
}

fn main() {
    let _: Router = Router::new().route("/things", post(create)).with_state(App {
        engine: Engine::new(MemoryStore::new()),
    });
}
