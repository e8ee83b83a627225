//! The least design beside idem: the payments debit between a claim of its
//! key and a record of its response, and nothing else (no fingerprint,
//! lease, fencing, expiry or detaching). The benchmarks run it on memory,
//! Redis and PostgreSQL as the floor under idem's cost.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use bytes::Bytes;
use idem_examples::payments::{App, Debit, MAX_BODY};

use crate::baseline;

/// The plain steps a baseline takes around the same debit, and nothing
/// else (no fingerprint, no lease renewal): claim the key, record the
/// response's body; a retry gets that body back.
pub(crate) trait NaiveKeys: Clone + Send + Sync + 'static {
    /// `Ok(true)` if the key was free and is now claimed.
    fn claim(&self, key: &str) -> impl Future<Output = Result<bool, String>> + Send;
    /// Stores the response under the key.
    fn record(&self, key: &str, response: &[u8])
        -> impl Future<Output = Result<(), String>> + Send;
    /// What is recorded under a claimed key (`None` while it runs).
    fn recorded(&self, key: &str) -> impl Future<Output = Result<Option<Bytes>, String>> + Send;
}

/// Memory: a map under a lock, the key claimed with an empty slot and the
/// response recorded in it: the floor of any design that claims keys in
/// process. Nothing expires; the map is emptied at a million keys, as idem's
/// purge bounds its store's table in a long run.
#[derive(Clone, Default)]
pub(crate) struct MemoryKeys(Arc<Mutex<HashMap<String, Option<Bytes>>>>);

impl NaiveKeys for MemoryKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        let mut map = self.0.lock().map_err(|e| e.to_string())?;
        if map.contains_key(key) {
            return Ok(false);
        }
        if map.len() >= 1 << 20 {
            map.clear();
        }
        map.insert(key.to_owned(), None);
        Ok(true)
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        let mut map = self.0.lock().map_err(|e| e.to_string())?;
        if let Some(slot) = map.get_mut(key) {
            *slot = Some(Bytes::copy_from_slice(response));
        }
        Ok(())
    }

    async fn recorded(&self, key: &str) -> Result<Option<Bytes>, String> {
        let map = self.0.lock().map_err(|e| e.to_string())?;
        Ok(map.get(key).cloned().flatten())
    }
}

/// The naive route's state: the app and where its keys are kept.
#[derive(Clone)]
pub(crate) struct Naive<K> {
    pub(crate) app: App,
    pub(crate) keys: K,
}

/// The baseline's key: the `Idempotency-Key` header's text, read in place
/// (the header map is not copied).
struct NaiveKey(String);

impl<S: Sync> FromRequestParts<S> for NaiveKey {
    type Rejection = StatusCode;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        parts
            .headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(|k| Self(k.to_owned()))
            .ok_or(StatusCode::BAD_REQUEST)
    }
}

/// The baseline handler: the payments debit between a claim and a record;
/// a retry of a recorded debit gets its body back (as 201 JSON: the naive
/// design records no status or headers).
async fn naive_debit<K: NaiveKeys>(
    State(n): State<Naive<K>>,
    Path(id): Path<String>,
    NaiveKey(key): NaiveKey,
    Json(req): Json<Debit>,
) -> Response {
    let key = format!("{id}:{key}");
    match n.keys.claim(&key).await {
        Ok(true) => {}
        Ok(false) => {
            return match n.keys.recorded(&key).await {
                Ok(Some(body)) => (
                    StatusCode::CREATED,
                    [(CONTENT_TYPE, "application/json")],
                    body,
                )
                    .into_response(),
                Ok(None) => StatusCode::CONFLICT.into_response(),
                Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            }
        }
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
    let response = baseline::debit_once(&n.app, id, &req, key.clone()).await;
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if n.keys.record(&key, &bytes).await.is_err() {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The baseline's debit route, with the layers the route without idem has.
pub(crate) fn naive_router<K: NaiveKeys>(naive: Naive<K>) -> Router {
    Router::new()
        .route("/accounts/{id}/debits", post(naive_debit::<K>))
        .with_state(naive)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(idem_axum::problem_json))
}
