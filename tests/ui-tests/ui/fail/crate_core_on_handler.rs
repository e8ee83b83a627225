// `crate = ...` pointing at idem_core on an axum handler: the handler form
// is generated against idem_axum.
use axum::extract::{FromRef, State};
use axum::Json;
use idem_axum::idempotent;
use idem_core::Engine;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(crate = "::idem_core", ttl = "1h")]
async fn create(State(_app): State<App>, Json(name): Json<String>) -> String {
    name
}

fn main() {}
