use axum::extract::{FromRef, State};
use axum::Json;
use idem_axum::idempotent;
use idem_core::Engine;
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Serialize, Deserialize)]
struct Event {
    id: String,
}

#[idempotent(key = event.id, key_required = false)]
async fn webhook(State(_app): State<App>, Json(event): Json<Event>) -> String {
    event.id
}

fn main() {}
