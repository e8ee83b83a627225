use axum::extract::{FromRef, Path, State};
use idem_axum::idempotent;
use idem_core::Engine;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(engine = app.engine, ttl = "24h")]
async fn debit(State(app): State<App>, Path(account): Path<String>) -> String {
    let _ = app;
    account
}

fn main() {}
