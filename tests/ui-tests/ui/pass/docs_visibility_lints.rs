#![allow(unused_imports)]
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
pub mod routes {
    use super::App;
    use axum::extract::State;
    use axum::Json;
    use idem_axum::idempotent;

    /// Creates a widget once per Idempotency-Key.
    #[idempotent(name = "create-widget")]
    #[allow(clippy::unused_async)]
    pub(crate) async fn create_widget(State(_app): State<App>, Json(name): Json<String>) -> String {
        name
    }
}

fn main() {
    let _: Router = Router::new().route("/widgets", post(routes::create_widget)).with_state(app());
}
