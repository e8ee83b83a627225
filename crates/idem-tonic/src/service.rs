//! The service that `IdempotencyLayer` wraps around a tonic server's
//! routes, and what it does with each call.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::Full;
use idem_core::{Call, Claim, Engine, Fingerprint, IdempotencyKey};
use idem_http::adapter::{read_request_body, Coverage, KeyDecision, TowerAdapter};
use idem_http::{Idempotency, Problem, ProblemKind};
use tonic::body::Body;
use tower_service::Service;

use crate::answer;
use crate::deadline::{grpc_timeout, AHEAD};
use crate::decompress::{readable, Unreadable};
use crate::frames::single_message;
use crate::layer::Tonic;
use crate::respond::Answers;

/// The service made by [`IdempotencyLayer`](crate::IdempotencyLayer).
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    engine: Engine,
    coverage: Arc<Coverage<Tonic>>,
}

impl<S> IdempotencyService<S> {
    /// `inner` behind `idempotency`'s engine and coverage (what the
    /// layer's `layer` makes).
    pub fn new(idempotency: &Idempotency<Tonic>, inner: S) -> Self {
        Self {
            inner,
            engine: idempotency.engine().clone(),
            coverage: Arc::clone(idempotency.coverage()),
        }
    }
}

impl<S> fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyService").finish_non_exhaustive()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> Service<Request<Body>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // The clone is not known to be ready; the original, which was polled
        // ready, serves this call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (engine, coverage) = (self.engine.clone(), Arc::clone(&self.coverage));
        Box::pin(handle(inner, engine, coverage, req))
    }
}

async fn handle<S, B>(
    mut inner: S,
    engine: Engine,
    coverage: Arc<Coverage<Tonic>>,
    req: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let started = tokio::time::Instant::now();
    let path = req.uri().path();
    if !coverage.methods.iter().any(|m| m == path) {
        return inner.call(req).await.map(|r| r.map(Body::new));
    }
    let deadline = grpc_timeout(req.headers()).map(|d| started + d.saturating_sub(AHEAD));
    let values = req.headers().get_all(&coverage.key_header);
    let key = match coverage.key_decision(values.iter().map(HeaderValue::as_bytes)) {
        KeyDecision::Key(key) => key,
        KeyDecision::PassThrough => return inner.call(req).await.map(|r| r.map(Body::new)),
        KeyDecision::Refuse(problem) => return Ok(answer::response(&problem)),
    };
    let (call, parts, bytes) = match read_grpc_call(&coverage, key, req).await {
        Ok(read) => read,
        Err(refused) => return Ok(refused),
    };

    let method = move |claim: Claim| async move {
        // The method may read its claim (for the fencing token), and may
        // hand over its open transaction (`commit_with_record`).
        let mut parts = parts;
        parts.extensions.insert(claim);
        let request = Request::from_parts(parts, Body::new(Full::new(bytes)));
        inner.call(request).await.map(|r| r.map(Body::new))
    };
    let answered = idem_http::adapter::respond(Answers::new(&coverage), engine, call, method);
    match deadline {
        None => answered.await,
        // Dropped at the deadline, the call goes on on a task of its own
        // and is recorded (or, not started yet, releases its claim).
        Some(at) => tokio::time::timeout_at(at, answered)
            .await
            .unwrap_or_else(|_| Ok(deadline_exceeded())),
    }
}

/// Reads a covered call with its `key`: its message (bounded, decompressed
/// if idem reads its encoding), its scope, and its fingerprint. `Err` is the
/// answer to a call refused before anything runs.
async fn read_grpc_call(
    coverage: &Coverage<Tonic>,
    key: IdempotencyKey,
    req: Request<Body>,
) -> Result<(Call, http::request::Parts, Bytes), Response<Body>> {
    let (parts, body) = req.into_parts();
    let bytes = match read_request_body(None, body, coverage.max_request_body).await {
        Ok(bytes) => bytes,
        Err(problem) => return Err(answer::response(&problem)),
    };
    let message = match single_message(&bytes) {
        Ok(message) => message,
        Err(what) => {
            return Err(answer::response(&Problem::new(
                ProblemKind::BadRequest,
                what,
            )))
        }
    };
    let encoding = parts
        .headers
        .get("grpc-encoding")
        .map(HeaderValue::as_bytes);
    let (readable, still_compressed) = if message.compressed {
        match readable(encoding, message.bytes, coverage.max_request_body) {
            Ok(read) => read,
            Err(Unreadable::TooLarge) => {
                return Err(answer::response(&Problem::too_large(
                    coverage.max_request_body,
                )))
            }
            Err(Unreadable::Corrupt(what)) => {
                return Err(answer::response(&Problem::new(
                    ProblemKind::BadRequest,
                    what,
                )))
            }
        }
    } else {
        (Cow::Borrowed(message.bytes), false)
    };
    let scope = match (coverage.scope)(&parts, &readable) {
        Ok(scope) => scope,
        Err(status) => return Err(status.into_http()),
    };
    // The method and the message as encoded: protobuf encoders write a
    // message's fields in field-number order, so a retry of the same
    // message is the same bytes. A message compressed in an encoding idem
    // reads is compared decompressed; in another, as sent, with its
    // encoding.
    let mut fp = Fingerprint::builder("grpc");
    fp.bytes("method", parts.uri.path().as_bytes());
    if still_compressed {
        fp.bytes("encoding", encoding.unwrap_or(b""));
    }
    fp.bytes("message", &readable);
    let operation = parts.uri.path().to_owned();
    let call = Call::new(scope, key, fp.finish()).with_operation(operation);
    Ok((call, parts, bytes))
}

/// The answer to a call whose deadline passed: `DEADLINE_EXCEEDED`, as
/// clients' retry policies expect (tonic's own timer says `CANCELLED`).
fn deadline_exceeded() -> Response<Body> {
    tonic::Status::deadline_exceeded(
        "the call's deadline passed before its answer; it was not cancelled: retry with the same \
         idempotency key to get its outcome",
    )
    .into_http()
}

impl TowerAdapter for Tonic {
    type Service<S> = IdempotencyService<S>;

    fn service<S>(idempotency: &Idempotency<Self>, inner: S) -> IdempotencyService<S> {
        IdempotencyService::new(idempotency, inner)
    }
}
