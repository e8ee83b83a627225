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
use axum::extract::Query;

#[derive(serde::Serialize, serde::Deserialize)]
struct Export { format: String, since: Option<u64> }

#[idempotent(on_conflict = "wait(10s)")]
async fn export(State(_app): State<App>, Query(q): Query<Export>) -> String {
    format!("{} {:?}", q.format, q.since)
}

fn main() {
    let _: Router = Router::new().route("/exports", post(export)).with_state(app());
}
