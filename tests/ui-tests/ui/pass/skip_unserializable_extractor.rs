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
use axum::extract::FromRequestParts;
use axum::http::{request::Parts, StatusCode};
use axum::Json;

/// A database handle pulled from the request: not part of what is asked.
struct Db;

impl<S: Send + Sync> FromRequestParts<S> for Db {
    type Rejection = StatusCode;
    async fn from_request_parts(_: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        Ok(Db)
    }
}

#[idempotent(skip(db))]
async fn create(State(_app): State<App>, db: Db, Json(name): Json<String>) -> String {
    let Db = db;
    name
}

fn main() {
    let _: Router = Router::new().route("/things", post(create)).with_state(app());
}
