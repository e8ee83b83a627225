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
use axum::Form;

#[derive(serde::Serialize, serde::Deserialize)]
struct Signup { email: String, plan: String }

#[idempotent]
async fn signup(State(_app): State<App>, Form(signup): Form<Signup>) -> String {
    format!("{} on {}", signup.email, signup.plan)
}

fn main() {
    let _: Router = Router::new().route("/signups", post(signup)).with_state(app());
}
