use axum::extract::{FromRef, Path, State};
use axum::Json;
use idem_axum::idempotent;
use idem_core::Engine;
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Serialize, Deserialize)]
struct Debit {
    amount: u64,
}

#[derive(Serialize, Deserialize)]
struct EventId(u64);

#[derive(Serialize, Deserialize)]
struct Event {
    id: EventId,
}

#[idempotent(key = event.id)]
async fn webhook(State(_app): State<App>, Json(event): Json<Event>) -> String {
    event.id.0.to_string()
}

fn main() {}
