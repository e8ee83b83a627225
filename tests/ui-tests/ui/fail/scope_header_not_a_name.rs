use axum::extract::{FromRef, State};
use idem_axum::idempotent;
use idem_core::Engine;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(scope = header("x api key"))]
async fn charge(State(_app): State<App>) -> &'static str {
    "charged"
}

fn main() {}
