//! `admin_router`: look a record up and remove it, by scope and key, for the
//! people who run the service. Mount it behind your own authentication, on
//! an address of its own.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use idem_core::{Engine, IdempotencyKey, RecordId, RecordInfoState, Removal, Scope};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::problem::{Problem, ProblemKind};
use crate::record;

/// The record a request names: `?scope=<scope>&key=<key>` (an empty or
/// missing scope is the global scope, which the layer uses by default).
#[derive(Debug, Deserialize)]
struct Target {
    #[serde(default)]
    scope: String,
    key: String,
    /// `GET`: show the recorded response (default: only its size).
    #[serde(default)]
    outcome: bool,
    /// `DELETE`: end an in-flight claim too.
    #[serde(default)]
    force: bool,
}

impl Target {
    fn id(&self) -> Result<(Scope, IdempotencyKey, RecordId), Problem> {
        let key = IdempotencyKey::parse(&self.key)
            .map_err(|e| Problem::new(ProblemKind::KeyMalformed, format!("{e}")))?;
        let scope = Scope::new(self.scope.clone());
        let id = RecordId::new(&scope, &key);
        Ok((scope, key, id))
    }
}

/// The operators' routes on `engine`'s store, under `/records`:
///
/// - `GET /records?scope=<scope>&key=<key>` answers the live record as JSON:
///   its id, state (`in_flight` with the lease left, or `completed` with the
///   time until it expires), fingerprint, fencing token and outcome size;
///   with `&outcome=true` also the recorded response (status, headers,
///   body). 404 if there is none.
/// - `DELETE /records?scope=<scope>&key=<key>` ends a completed record, so
///   that the next request with the key runs again; an in-flight one (its
///   holder may still be running: a retry would run twice) answers 409
///   unless `&force=true`. Forced, the running holder's claim is lost at
///   once: an effect it commits with its record (`Claim::commit`) is
///   refused and never lands, so the retry takes effect once; an effect it
///   already committed, or one outside the store that carries neither the
///   claim's downstream key nor its fencing token, is not undone. 404 if
///   there is none.
///
/// Errors are problem+json. The routes are not authenticated: mount them
/// behind your own authentication, on an internal address.
///
/// ```no_run
/// # async fn serve(engine: idem_core::Engine) {
/// let admin = idem_axum::admin_router(engine);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await.unwrap();
/// axum::serve(listener, admin).await.unwrap();
/// # }
/// ```
pub fn admin_router(engine: Engine) -> Router {
    Router::new()
        .route("/records", get(look_up).delete(remove))
        .with_state(engine)
}

fn answer(result: Result<Response, Problem>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

fn unavailable(e: &idem_core::StoreError) -> Problem {
    Problem::new(
        ProblemKind::StoreUnavailable,
        format!("the idempotency store did not answer: {e}"),
    )
    .retry_after(1)
}

async fn look_up(State(engine): State<Engine>, Query(target): Query<Target>) -> Response {
    answer(look_up_inner(&engine, &target).await)
}

async fn look_up_inner(engine: &Engine, target: &Target) -> Result<Response, Problem> {
    let (scope, key, id) = target.id()?;
    let info = engine
        .store()
        .inspect(&id)
        .await
        .map_err(|e| unavailable(&e))?
        .ok_or_else(|| not_found(&scope, &key))?;
    let mut body = json!({
        "record_id": id.to_hex(),
        "scope": scope.as_str(),
        "key": key.as_str(),
        "fingerprint": info.fingerprint.to_hex(),
        "fencing_token": info.token.0,
    });
    match info.state {
        RecordInfoState::InFlight { lease_left } => {
            body["state"] = json!("in_flight");
            body["lease_left_ms"] = json!(lease_left.as_millis());
        }
        RecordInfoState::Completed {
            expires_in,
            outcome,
        } => {
            body["state"] = json!("completed");
            body["expires_in_ms"] = json!(expires_in.as_millis());
            body["outcome_bytes"] = json!(outcome.len());
            if target.outcome {
                body["outcome"] = shown(&outcome).await;
            }
        }
    }
    Ok(Json(body).into_response())
}

/// A recorded outcome as JSON: the HTTP response it records, or its bytes as
/// text for a result recorded by `Engine::run`.
async fn shown(outcome: &idem_core::Outcome) -> Value {
    let Ok(response) = record::decode(outcome) else {
        return json!({ "text": String::from_utf8_lossy(outcome.as_bytes()) });
    };
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect();
    json!({
        "status": parts.status.as_u16(),
        "headers": headers,
        "body": String::from_utf8_lossy(&bytes),
    })
}

fn not_found(scope: &Scope, key: &IdempotencyKey) -> Problem {
    Problem::new(
        ProblemKind::NotFound,
        format!(
            "no live record for key `{}` in scope `{}`",
            key.as_str(),
            scope.as_str()
        ),
    )
}

async fn remove(State(engine): State<Engine>, Query(target): Query<Target>) -> Response {
    answer(remove_inner(&engine, &target).await)
}

async fn remove_inner(engine: &Engine, target: &Target) -> Result<Response, Problem> {
    let (scope, key, id) = target.id()?;
    match engine
        .store()
        .remove(&id, target.force)
        .await
        .map_err(|e| unavailable(&e))?
    {
        Removal::Removed => {
            tracing::info!(target: "idem", record = %id, scope = scope.as_str(), force = target.force, "record removed by an operator");
            Ok(Json(json!({ "record_id": id.to_hex(), "removed": true })).into_response())
        }
        Removal::InFlight => Err(Problem::new(
            ProblemKind::InFlight,
            "the record is in flight: its request may still be running, and removing it would \
             let a retry run it a second time; wait for it to finish, or add `force=true` if its \
             holder is known to be gone",
        )),
        Removal::Absent => Err(not_found(&scope, &key)),
    }
}
