//! The service that `IdempotencyLayer` wraps around a tonic server's
//! routes, and what it does with each call.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use idem_core::{Call, Completion, Engine, Execution, Fingerprint};
use idem_http::{
    key_from_values, spawn_on_tokio, CallerGone, Detached, Problem, ProblemKind,
    IDEMPOTENT_REPLAYED,
};
use tonic::body::Body;
use tower_service::Service;

use crate::answer;
use crate::commit_with_record::RunSlot;
use crate::config::Config;
use crate::deadline::{grpc_timeout, AHEAD};
use crate::decompress::{readable, Unreadable};
use crate::frames::single_message;
use crate::record::{self, Buffered};

/// The service made by [`IdempotencyLayer`](crate::IdempotencyLayer).
#[derive(Clone)]
pub struct IdempotencyService<S> {
    pub(crate) inner: S,
    pub(crate) engine: Engine,
    pub(crate) config: Arc<Config>,
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
        let (engine, config) = (self.engine.clone(), Arc::clone(&self.config));
        Box::pin(handle(inner, engine, config, req))
    }
}

async fn handle<S, B>(
    mut inner: S,
    engine: Engine,
    config: Arc<Config>,
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
    if !config.methods.iter().any(|m| m == path) {
        return inner.call(req).await.map(|r| r.map(Body::new));
    }
    let deadline = grpc_timeout(req.headers()).map(|d| started + d.saturating_sub(AHEAD));
    let key = key_from_values(
        req.headers()
            .get_all(&config.key)
            .iter()
            .map(HeaderValue::as_bytes),
    );
    let key = match key {
        Ok(Some(key)) => key,
        Ok(None) if config.key_required => {
            return Ok(answer::response(&Problem::new(
                ProblemKind::KeyMissing,
                format!(
                    "this method requires an idempotency key in `{}` metadata: send a unique \
                     value (a UUID, say) with each new call and the same value when retrying it",
                    config.key
                ),
            )))
        }
        Ok(None) => return inner.call(req).await.map(|r| r.map(Body::new)),
        Err(e) => return Ok(answer::response(&Problem::key_malformed(&e))),
    };
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, config.max_request).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Ok(answer::response(&Problem::too_large(config.max_request)))
        }
        Err(e) => return Ok(answer::response(&Problem::body_unreadable(&e))),
    };
    let message = match single_message(&bytes) {
        Ok(message) => message,
        Err(what) => {
            return Ok(answer::response(&Problem::new(
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
        match readable(encoding, message.bytes, config.max_request) {
            Ok(read) => read,
            Err(Unreadable::TooLarge) => {
                return Ok(answer::response(&Problem::too_large(config.max_request)))
            }
            Err(Unreadable::Corrupt(what)) => {
                return Ok(answer::response(&Problem::new(
                    ProblemKind::BadRequest,
                    what,
                )))
            }
        }
    } else {
        (Cow::Borrowed(message.bytes), false)
    };
    let scope = match (config.scope)(&parts, &readable) {
        Ok(scope) => scope,
        Err(status) => return Ok(status.into_http()),
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

    let record = *call.record_id();
    let detached = Detached::new(
        |gone| run(inner, engine, call, Arc::clone(&config), parts, bytes, gone),
        spawn_on_tokio,
    );
    let answered = AssertUnwindSafe(detached).catch_unwind();
    let answered = match deadline {
        None => answered.await,
        Some(at) => {
            if let Ok(answered) = tokio::time::timeout_at(at, answered).await {
                answered
            } else {
                // Dropped here, the call goes on on a task of its own and
                // is recorded (or, not started yet, releases its claim).
                return Ok(deadline_exceeded());
            }
        }
    };
    if let Ok(Some(answer)) = answered {
        answer
    } else {
        // Whatever the method did may have taken effect: the engine keeps
        // the claim until its lease ends.
        tracing::error!(target: "idem", record = %record, "the method panicked; its outcome is unknown and its claim is kept until the lease ends");
        Ok(answer::response(&Problem::handler_failed()))
    }
}

/// Runs the call through the engine and answers: the method's response, a
/// replay, or an idem status. A call whose client went away (its deadline
/// passed) before the method started is not started: its claim is released.
async fn run<S, B>(
    mut inner: S,
    engine: Engine,
    call: Call,
    config: Arc<Config>,
    mut parts: http::request::Parts,
    bytes: Bytes,
    gone: CallerGone,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let limit = config.max_response;
    let result = engine
        .execute(&call, |claim| async move {
            if gone.before_start() {
                // Nobody waits for this answer, and nothing has run.
                let status = tonic::Status::cancelled("the caller went away before the method started");
                return Completion::Release(Ok(status.into_http()));
            }
            // The method may read its claim (for the fencing token), and may
            // hand over its open transaction (`commit_with_record`).
            let own = claim.clone();
            parts.extensions.insert(claim);
            let slot = Arc::new(RunSlot::default());
            let called = slot
                .run(inner.call(Request::from_parts(parts, Body::new(Full::new(bytes)))))
                .await;
            let pending = slot.take();
            let response = match called {
                Ok(response) => response,
                // No response at all: nothing to record.
                Err(e) => {
                    if let Some(tx) = pending {
                        tx.roll_back().await;
                    }
                    return Completion::Release(Err(e));
                }
            };
            let (response, outcome) = match record::buffer(response, limit).await {
                Buffered::Whole(response, code, _) if !config.record.records(code) => {
                    if let Some(tx) = pending {
                        tx.roll_back().await;
                    }
                    return Completion::Release(Ok(response));
                }
                Buffered::Whole(response, _, outcome) => (response, outcome),
                Buffered::NotRecordable(response) => {
                    // The method ran: releasing would let a retry run it
                    // again. Retries get a status that says so instead.
                    tracing::warn!(target: "idem", limit, "response not recorded: larger than the limit or unreadable; retries get INTERNAL response-not-recorded");
                    (response, not_recorded_status(limit))
                }
            };
            let Some(tx) = pending else {
                return Completion::Record {
                    value: Ok(response),
                    outcome,
                };
            };
            // The commit tells the engine how the claim ended; what is
            // returned here is only the answer.
            match tx.record_and_commit(own, outcome).await {
                Ok(()) => Completion::Keep(Ok(response)),
                // The claim says what became of it (kept: another call holds
                // the key, or the commit is uncertain; released: nothing was
                // applied) except after a conflict, which releases it here.
                Err(e) => Completion::Release(Ok(answer::response(&Problem::for_commit_error(&e)))),
            }
        })
        .await;
    Ok(match result {
        Ok(Execution::Executed(answer)) => return answer,
        Ok(Execution::Replayed(outcome)) => match record::decode(&outcome) {
            Ok(mut response) => {
                response.headers_mut().insert(
                    http::HeaderName::from_static(IDEMPOTENT_REPLAYED),
                    HeaderValue::from_static("true"),
                );
                response
            }
            Err(e) => {
                tracing::error!(target: "idem", record = %call.record_id(), part = e.0, "recorded response cannot be decoded");
                answer::response(&Problem::replay_unreadable())
            }
        },
        Err(e) => answer::response(&Problem::for_error(&e)),
    })
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

/// The record of a response that was served but could not be recorded: a
/// trailers-only `INTERNAL` status saying so.
fn not_recorded_status(limit: usize) -> idem_core::Outcome {
    let response = answer::response(&Problem::not_recorded(limit));
    let fields: Vec<(&str, &[u8])> = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    idem_http::encode(response.status().as_u16(), &fields, &[])
}
