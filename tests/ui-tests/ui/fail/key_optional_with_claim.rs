use axum::extract::{FromRef, State};
use idem_axum::idempotent;
use idem_core::Engine;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(key_required = false, claim = claim)]
async fn note(State(_app): State<App>) -> String {
    claim.fencing_token().to_string()
}

fn main() {}
