//! An emulator of AWS Lambda's runtime API (the HTTP protocol between
//! Lambda and a function's runtime: `GET /2018-06-01/runtime/invocation/next`
//! hands out an event, `POST .../{id}/response` or `.../{id}/error` takes
//! the answer), so that a function built with `lambda_http` runs here as on
//! Lambda: a process that polls for events. Written for these tests; no
//! emulator from a package registry runs a Rust function.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};

/// Where an invocation's answer (or the error reported) goes.
type Answer = oneshot::Sender<Result<serde_json::Value, String>>;

/// An invocation waiting for a runtime, and where its answer goes.
struct Invocation {
    id: String,
    event: serde_json::Value,
    answer: Answer,
}

#[derive(Clone)]
struct Api {
    queued: Arc<AsyncMutex<mpsc::UnboundedReceiver<Invocation>>>,
    waiting: Arc<Mutex<HashMap<String, Answer>>>,
}

/// The runtime API on 127.0.0.1, and the invocations sent to it.
pub struct LambdaRuntimeApi {
    /// `host:port`, for `AWS_LAMBDA_RUNTIME_API`.
    pub address: String,
    queue: mpsc::UnboundedSender<Invocation>,
    next_id: std::sync::atomic::AtomicU64,
}

async fn next(State(api): State<Api>) -> Response {
    let Some(invocation) = api.queued.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    api.waiting
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(invocation.id.clone(), invocation.answer);
    let deadline = std::time::SystemTime::now() + Duration::from_secs(30);
    let deadline_ms = deadline
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set("lambda-runtime-aws-request-id", invocation.id);
    set("lambda-runtime-deadline-ms", deadline_ms.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:idem".to_owned(),
    );
    set(
        "lambda-runtime-trace-id",
        "Root=1-00000000-000000000000000000000000".to_owned(),
    );
    (headers, axum::Json(invocation.event)).into_response()
}

fn answered(api: &Api, id: &str, answer: Result<serde_json::Value, String>) -> StatusCode {
    let waiting = api
        .waiting
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(id);
    match waiting {
        Some(tx) => {
            let _ = tx.send(answer);
            StatusCode::ACCEPTED
        }
        None => StatusCode::NOT_FOUND,
    }
}

async fn response(State(api): State<Api>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    let answer = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"));
    answered(&api, &id, answer)
}

async fn error(State(api): State<Api>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    answered(&api, &id, Err(String::from_utf8_lossy(&body).into_owned()))
}

impl LambdaRuntimeApi {
    /// The API, listening.
    pub async fn start() -> Self {
        let (queue, queued) = mpsc::unbounded_channel();
        let api = Api {
            queued: Arc::new(AsyncMutex::new(queued)),
            waiting: Arc::default(),
        };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .with_state(api);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let address = listener.local_addr().expect("its address").to_string();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            address,
            queue,
            next_id: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// The environment a function's runtime reads at start.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_LAMBDA_RUNTIME_API", self.address.clone()),
            ("AWS_LAMBDA_FUNCTION_NAME", "idem".to_owned()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".to_owned()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "test".to_owned()),
            ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/idem".to_owned()),
        ]
    }

    /// Invokes the function with `event` and waits (30 s at most) for its
    /// answer, or the error it reported.
    pub async fn invoke(&self, event: serde_json::Value) -> Result<serde_json::Value, String> {
        let id = format!(
            "request-{}",
            self.next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Invocation { id, event, answer })
            .map_err(|_| "the API stopped".to_owned())?;
        tokio::time::timeout(Duration::from_secs(30), answered)
            .await
            .map_err(|_| "no answer within 30 s".to_owned())?
            .map_err(|_| "the invocation was dropped".to_owned())?
    }
}
