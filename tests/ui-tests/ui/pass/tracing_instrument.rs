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
use axum::extract::Path;
use axum::Json;

#[idempotent(scope = "account")]
#[tracing::instrument(skip(app))]
async fn debit(State(app): State<App>, Path(account): Path<String>, Json(amount): Json<u64>) -> String {
    let _ = app;
    tracing::info!(amount, "debiting");
    format!("{account} -{amount}")
}

fn main() {
    let _: Router = Router::new().route("/accounts/{account}/debits", post(debit)).with_state(app());
}
