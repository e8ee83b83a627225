//! `admin_router`: look a record up and remove it, by scope and key, for the
//! people who run the service. Mount it behind your own authentication, on
//! an address of its own.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use idem_core::{Engine, IdempotencyKey, RecordId, RecordInfoState, Removal, Scope};
use serde_json::{json, Value};

use crate::problem::{Problem, ProblemKind};
use crate::problem_json::problem_json;

/// The record a request names: `?scope=<scope>&key=<key>` (an empty or
/// missing scope is the global scope, which the layer uses by default).
#[derive(Debug)]
struct Target {
    scope: Scope,
    key: IdempotencyKey,
    /// `GET`: show the recorded response (default: only its size).
    outcome: bool,
    /// `DELETE`: end an in-flight claim too.
    force: bool,
}

/// What the routes take, for the errors that name them.
const PARAMETERS: &str =
    "`scope`, `key`, `outcome` (GET: true or false) and `force` (DELETE: true or false)";

impl Target {
    /// Reads the query strictly: an operator's typo (a repeated or unknown
    /// parameter, `force=yes`) is refused rather than guessed at, since a
    /// guess could name another record or remove one that was meant to stay.
    fn parse(query: Option<&str>) -> Result<Self, Problem> {
        let (mut scope, mut key, mut outcome, mut force) = (None, None, None, None);
        for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let slot = match name.as_ref() {
                "scope" => &mut scope,
                "key" => &mut key,
                "outcome" => &mut outcome,
                "force" => &mut force,
                other => {
                    return Err(bad_request(format!(
                        "unknown query parameter `{other}`: the parameters are {PARAMETERS}"
                    )))
                }
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(bad_request(format!(
                    "the query parameter `{name}` is given more than once: name one record per \
                     request"
                )));
            }
        }
        let Some(key) = key else {
            return Err(bad_request(format!(
                "the query parameter `key` is missing: name the record as \
                 `/records?scope=<scope>&key=<key>`; the parameters are {PARAMETERS}"
            )));
        };
        let key = IdempotencyKey::parse(&key).map_err(|e| {
            Problem::new(
                ProblemKind::KeyMalformed,
                format!("the query parameter `key`: {e}"),
            )
        })?;
        Ok(Target {
            scope: Scope::new(scope.unwrap_or_default()),
            key,
            outcome: flag("outcome", outcome.as_deref())?,
            force: flag("force", force.as_deref())?,
        })
    }

    fn id(&self) -> RecordId {
        RecordId::new(&self.scope, &self.key)
    }
}

/// A boolean query parameter: `true`/`1` or `false`/`0`; absent is false.
fn flag(name: &str, value: Option<&str>) -> Result<bool, Problem> {
    match value {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(bad_request(format!(
            "the query parameter `{name}` is `{other}`: it must be `true` or `false`"
        ))),
    }
}

fn bad_request(detail: String) -> Problem {
    Problem::new(ProblemKind::BadRequest, detail)
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
/// Every error is problem+json: a missing, repeated or unknown query
/// parameter and a flag that is not `true` or `false` (400 `bad-request`), a
/// malformed key (400 `key-malformed`), another method (405, with `Allow`),
/// another path (404). The routes are not authenticated: mount them
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
        .layer(map_response(problem_json))
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

async fn look_up(State(engine): State<Engine>, RawQuery(query): RawQuery) -> Response {
    answer(look_up_inner(&engine, query.as_deref()).await)
}

async fn look_up_inner(engine: &Engine, query: Option<&str>) -> Result<Response, Problem> {
    let target = Target::parse(query)?;
    let (scope, key, id) = (&target.scope, &target.key, target.id());
    let info = engine
        .store()
        .inspect(&id)
        .await
        .map_err(|e| unavailable(&e))?
        .ok_or_else(|| not_found(scope, key))?;
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
    let response =
        idem_http::decode(outcome).and_then(|r| r.into_response(|body, _| Body::from(body)));
    let Ok(response) = response else {
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

async fn remove(State(engine): State<Engine>, RawQuery(query): RawQuery) -> Response {
    answer(remove_inner(&engine, query.as_deref()).await)
}

async fn remove_inner(engine: &Engine, query: Option<&str>) -> Result<Response, Problem> {
    let target = Target::parse(query)?;
    let (scope, key, id) = (&target.scope, &target.key, target.id());
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
        Removal::RefusedInFlight => Err(Problem::new(
            ProblemKind::InFlight,
            "the record is in flight: its request may still be running, and removing it would \
             let a retry run it a second time; wait for it to finish, or add `force=true` if its \
             holder is known to be gone",
        )),
        Removal::Absent => Err(not_found(scope, key)),
    }
}
