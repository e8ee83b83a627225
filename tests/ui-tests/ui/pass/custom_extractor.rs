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

/// The authenticated user, a custom extractor that describes the request.
#[derive(serde::Serialize)]
struct User { id: String }

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = StatusCode;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        let id = parts.headers.get("x-user").ok_or(StatusCode::UNAUTHORIZED)?;
        Ok(User { id: id.to_str().map_err(|_| StatusCode::BAD_REQUEST)?.to_owned() })
    }
}

impl std::fmt::Display for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

#[idempotent(scope = "user")]
async fn post_comment(State(_app): State<App>, user: User, Json(text): Json<String>) -> String {
    format!("{user}: {text}")
}

fn main() {
    let _: Router = Router::new().route("/comments", post(post_comment)).with_state(app());
}
