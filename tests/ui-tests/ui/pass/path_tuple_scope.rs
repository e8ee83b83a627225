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

#[idempotent(scope = "org")]
async fn invite(State(_app): State<App>, Path((org, team)): Path<(String, u32)>, Json(email): Json<String>) -> String {
    format!("{email} to {org}/{team}")
}

fn main() {
    let _: Router = Router::new().route("/orgs/{org}/teams/{team}/invites", post(invite)).with_state(app());
}
