use axum::extract::{FromRef, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use idem_axum::idempotent;
use idem_core::Engine;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

/// A custom extractor that is not `Serialize`.
struct Caller(String);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = StatusCode;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        let who = parts.headers.get("x-caller").ok_or(StatusCode::UNAUTHORIZED)?;
        Ok(Caller(who.to_str().map_err(|_| StatusCode::BAD_REQUEST)?.to_owned()))
    }
}

#[idempotent(ttl = "24h")]
async fn debit(State(app): State<App>, caller: Caller, Path(account): Path<String>) -> String {
    let _ = (app, caller.0);
    account
}

fn main() {}
