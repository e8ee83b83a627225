use axum::extract::{FromRef, Path, State};
use axum::http::HeaderMap;
use idem_axum::idempotent;
use idem_core::Engine;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[idempotent(ttl = "24h")]
async fn debit(State(app): State<App>, headers: HeaderMap, Path(account): Path<String>) -> String {
    let _ = (app, headers);
    account
}

fn main() {}
