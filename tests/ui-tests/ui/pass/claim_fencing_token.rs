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

/// The claim's fencing token goes to the provider, which refuses an older one.
#[idempotent(scope = "account", claim = claim, lease = "10s")]
async fn pay(State(_app): State<App>, Path(account): Path<String>) -> String {
    format!("{account} under token {}", claim.fencing_token())
}

fn main() {
    let _: Router = Router::new().route("/accounts/{account}/pay", post(pay)).with_state(app());
}
