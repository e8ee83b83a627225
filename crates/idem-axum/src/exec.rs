//! What the layer and the extractor share: settings, key parsing, the request
//! fingerprint, and turning an engine answer into an HTTP response.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;

use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use idem_core::{
    Call, Claim, Completion, Engine, Error, Execution, FingerprintBuilder, IdempotencyKey, Outcome,
};

use crate::detached::Detached;
use crate::problem::{Problem, ProblemKind};
use crate::record::{self, Buffered};

/// The request header carrying the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The response header marking a replay.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Which handler answers are recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordPolicy {
    /// Record every answer below 500; a 5xx answer releases the claim so that
    /// a retry runs the handler again (the default).
    #[default]
    ExceptServerErrors,
    /// Record every answer, 5xx included (Stripe's practice).
    All,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub(crate) max_request_body: usize,
    pub(crate) max_response_body: usize,
    pub(crate) record: RecordPolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_request_body: 1 << 20,
            max_response_body: 1 << 20,
            record: RecordPolicy::ExceptServerErrors,
        }
    }
}

/// Reads the key from the headers: `Ok(None)` if absent.
pub(crate) fn key_from_headers(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Problem::new(
            ProblemKind::KeyMalformed,
            "the Idempotency-Key header was sent more than once; send it once per request",
        ));
    }
    IdempotencyKey::parse_bytes(value.as_bytes())
        .map(Some)
        .map_err(|e| Problem::new(ProblemKind::KeyMalformed, format!("{e}")))
}

pub(crate) fn key_missing() -> Problem {
    Problem::new(
        ProblemKind::KeyMissing,
        "this endpoint requires an Idempotency-Key header: send a unique value (a UUID, say) \
         with each new request and the same value when retrying it",
    )
}

/// Starts the fingerprint of an HTTP request: method, route, path and query.
/// Query parameters are sorted by name (repeated names keep their order), so
/// `?a=1&b=2` and `?b=2&a=1` are the same request.
pub(crate) fn request_fingerprint(
    operation: &str,
    method: &Method,
    route: Option<&str>,
    path: &str,
    query: Option<&str>,
) -> FingerprintBuilder {
    let mut fp = idem_core::Fingerprint::builder(operation);
    fp.bytes("method", method.as_str().as_bytes());
    fp.bytes("route", route.unwrap_or("").as_bytes());
    fp.bytes("path", path.as_bytes());
    let mut pairs: Vec<(&str, &str)> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in pairs {
        fp.bytes("query-name", k.as_bytes());
        fp.bytes("query-value", v.as_bytes());
    }
    fp
}

/// Whether a content type is JSON (`application/json` or `*/*+json`).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| {
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
}

/// Runs `handler` through the engine for `call`, recording its response, and
/// answers with the handler's response, a replay, or a problem.
///
/// Everything from the claim on is [`Detached`]: driven in the connection's
/// own task, and, if that task drops it (the client hung up, or a timeout
/// layer above gave up), handed whole to a task of its own. The handler is
/// never cancelled half-way: it runs to its end and its response is recorded
/// whether or not anyone still listens, so the retry gets the replay (or 409
/// while it still runs), never a second execution. A handler that panics
/// answers 500; its claim is kept until the lease ends.
pub(crate) async fn respond<F, Fut, R>(
    engine: Engine,
    call: Call,
    settings: Settings,
    handler: F,
) -> Response
where
    F: FnOnce(Claim) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoResponse,
{
    let record = *call.record_id();
    let detached =
        Detached::new(async move { run_recorded(&engine, &call, settings, handler).await });
    if let Ok(Some(response)) = AssertUnwindSafe(detached).catch_unwind().await {
        response
    } else {
        // Whatever the handler did may have taken effect: the engine keeps
        // the claim until its lease ends.
        tracing::error!(target: "idem", record = %record, "the handler panicked; its outcome is unknown and its claim is kept until the lease ends");
        Problem::new(
            ProblemKind::HandlerFailed,
            "the request failed while it was processed and may have taken effect; retrying \
             with the same Idempotency-Key answers 409 until the claim's lease ends, then \
             runs the request again",
        )
        .into_response()
    }
}

async fn run_recorded<F, Fut, R>(
    engine: &Engine,
    call: &Call,
    settings: Settings,
    handler: F,
) -> Response
where
    F: FnOnce(Claim) -> Fut,
    Fut: Future<Output = R>,
    R: IntoResponse,
{
    let max_response = settings.max_response_body;
    let record_policy = settings.record;
    let result = engine
        .execute(call, |claim| async move {
            let response = handler(claim).await.into_response();
            let recordable = match record_policy {
                RecordPolicy::All => true,
                RecordPolicy::ExceptServerErrors => !response.status().is_server_error(),
            };
            if !recordable {
                return Completion::Release(response);
            }
            match record::buffer(response, max_response).await {
                Buffered::Whole(response, outcome) => Completion::Record {
                    value: response,
                    outcome,
                },
                Buffered::NotRecordable(response) => {
                    // The handler ran: releasing would let a retry run it
                    // again. Retries get a stand-in that says so instead.
                    tracing::warn!(target: "idem", limit = max_response, "response not recorded: larger than the limit or unreadable; retries get a response-not-recorded problem");
                    Completion::Record {
                        value: response,
                        outcome: not_recorded(max_response),
                    }
                }
            }
        })
        .await;
    match result {
        Ok(Execution::Executed(response)) => response,
        Ok(Execution::Replayed(outcome)) => match record::decode(&outcome) {
            Ok(mut response) => {
                response
                    .headers_mut()
                    .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
                response
            }
            Err(e) => {
                tracing::error!(target: "idem", record = %call.record_id(), part = e.0, "recorded response cannot be decoded");
                Problem::new(
                    ProblemKind::ReplayUnreadable,
                    "the response recorded for this key cannot be read back; the request was not processed again",
                )
                .into_response()
            }
        },
        Err(e) => error_response(&e).into_response(),
    }
}

/// What a retry gets for a response that was served but could not be recorded.
fn not_recorded(limit: usize) -> Outcome {
    let problem = Problem::new(
        ProblemKind::ResponseNotRecorded,
        format!(
            "the request with this Idempotency-Key was processed, but its response (larger than \
             the {limit} bytes this endpoint records, or cut off) could not be recorded; it was \
             not processed again"
        ),
    );
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    record::encode(problem.kind().status(), &headers, problem.body().as_bytes())
}

/// `Retry-After` for a request in flight, in seconds. The first request
/// usually finishes long before its lease ends, and a retry then gets its
/// recorded response, so the wait is short rather than the lease's remainder
/// (which the engine's `Error::InFlight` still carries for other callers).
const IN_FLIGHT_RETRY_AFTER_SECS: u64 = 1;

/// The problem for an engine error.
pub(crate) fn error_response(e: &Error) -> Problem {
    match e {
        Error::InFlight { .. } => Problem::new(
            ProblemKind::InFlight,
            "a request with this Idempotency-Key is still being processed; retry after the \
             Retry-After delay to receive its response",
        )
        .retry_after(IN_FLIGHT_RETRY_AFTER_SECS),
        Error::Mismatch => Problem::new(
            ProblemKind::KeyReused,
            "this Idempotency-Key was already used with a different request (method, path, query \
             or body); use a new key for a new request",
        ),
        Error::Store(_) => Problem::new(
            ProblemKind::StoreUnavailable,
            "the idempotency store could not be reached, so the request was not processed; retry \
             later with the same Idempotency-Key",
        )
        .retry_after(1),
        Error::LeaseLost => Problem::new(
            ProblemKind::LeaseLost,
            "the request took longer than its claim and another attempt took it over; retry with \
             the same Idempotency-Key to receive the recorded response",
        )
        .retry_after(1),
        _ => Problem::new(
            ProblemKind::ReplayUnreadable,
            "the response for this key could not be recorded or read back",
        ),
    }
}
