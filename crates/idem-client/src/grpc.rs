//! `GrpcIdempotencyLayer`: the same for tonic clients. A tower layer over a
//! `Channel` that puts one key in each unary call's metadata and retries
//! the call with it: no answer, `ABORTED` (the same key in flight; its
//! `grpc-retry-pushback-ms`, or else its `google.rpc.RetryInfo`, honoured),
//! `UNAVAILABLE`, and
//! `DEADLINE_EXCEEDED` (idem answers it ahead of a call's deadline and goes
//! on: the retry gets the outcome).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::{BodyExt as _, Full};
use tokio::time::Instant;
use tonic::body::Body;
use tonic::Code;
use tower_service::Service;

use idem_core::Claim;

use crate::call_failed::{never_reached, CallFailed};
use crate::call_report::CallReport;
use crate::key::KeyMint;
use crate::policy::{Attempt, NextAttempt, RetryPolicy};

/// A tower layer for tonic clients: `ServiceBuilder::new()
/// .layer(GrpcIdempotencyLayer::new()).service(channel)`, then the
/// generated client over it.
///
/// Each call gets a key in `idempotency-key` metadata (the one already set
/// on the request is kept), minted before the first attempt, and is
/// retried with it as its [`RetryPolicy`] says, its gRPC code read as the
/// HTTP status the policy knows: `ABORTED` as 409, `UNAVAILABLE` as 503,
/// `DEADLINE_EXCEEDED` as 504 (a 5xx: retried unless
/// `server_errors(false)`), `RESOURCE_EXHAUSTED` as 429 only with a
/// pushback; every other code is final. The pushback, read as
/// `Retry-After`, is `grpc-retry-pushback-ms` or, without it, the delay of
/// a `google.rpc.RetryInfo` in the status details; a pushback that is
/// negative or not a number makes the answer final (gRFC A6). The request message is
/// buffered (up to 4 MiB) so that it can be sent again. The response's
/// extensions carry an [`CallReport`].
#[derive(Clone, Debug)]
pub struct GrpcIdempotencyLayer {
    config: Arc<Config>,
}

#[derive(Clone, Debug)]
struct Config {
    header: HeaderName,
    mint: KeyMint,
    policy: RetryPolicy,
    max_message: usize,
    propagate: bool,
}

impl Default for GrpcIdempotencyLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl GrpcIdempotencyLayer {
    /// Keys in `idempotency-key` metadata, random UUIDs, the default policy.
    pub fn new() -> Self {
        Self {
            config: Arc::new(Config {
                header: HeaderName::from_static(idem_http::IDEMPOTENCY_KEY),
                mint: KeyMint::default(),
                policy: RetryPolicy::default(),
                max_message: 4 << 20,
                propagate: false,
            }),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// The metadata key that carries the idempotency key.
    #[must_use]
    pub fn header(mut self, name: HeaderName) -> Self {
        self.config_mut().header = name;
        self
    }

    /// How keys are minted.
    #[must_use]
    pub fn mint(mut self, mint: KeyMint) -> Self {
        self.config_mut().mint = mint;
        self
    }

    /// Which attempts are retried, and how.
    #[must_use]
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.config_mut().policy = policy;
        self
    }

    /// Whether a call made from inside an idempotent operation carries a
    /// key derived from the operation's claim and the method's path
    /// (`Claim::downstream_key`), instead of a new one (default `false`);
    /// see [`IdempotentRetries::propagate`](crate::IdempotentRetries::propagate).
    #[must_use]
    pub fn propagate(mut self, propagate: bool) -> Self {
        self.config_mut().propagate = propagate;
        self
    }
}

impl<S> tower_layer::Layer<S> for GrpcIdempotencyLayer {
    type Service = GrpcIdempotency<S>;

    fn layer(&self, inner: S) -> GrpcIdempotency<S> {
        GrpcIdempotency {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service [`GrpcIdempotencyLayer`] makes.
#[derive(Clone, Debug)]
pub struct GrpcIdempotency<S> {
    inner: S,
    config: Arc<Config>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S> Service<Request<Body>> for GrpcIdempotency<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
{
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(call(inner, Arc::clone(&self.config), req))
    }
}

async fn call<S>(
    mut inner: S,
    config: Arc<Config>,
    req: Request<Body>,
) -> Result<Response<Body>, BoxError>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
{
    let (mut parts, body) = req.into_parts();
    let own = parts
        .headers
        .get(&config.header)
        .and_then(|v| v.to_str().ok());
    let claim = config.propagate.then(Claim::current).flatten();
    let derived = own.is_none() && claim.is_some();
    let key = if let Some(own) = own {
        own.to_owned()
    } else {
        let key = match &claim {
            Some(claim) => {
                let path = parts.uri.path();
                let key = claim.downstream_key(path);
                tracing::debug!(target: "idem", record = %claim.record_id(), call_site = %path, key = %key.as_str(), "downstream call keyed from the claim");
                key.as_str().to_owned()
            }
            None => config.mint.mint(),
        };
        parts
            .headers
            .insert(config.header.clone(), HeaderValue::from_str(&key)?);
        key
    };
    let message = http_body_util::Limited::new(body, config.max_message)
        .collect()
        .await?
        .to_bytes();
    let started = Instant::now();
    let mut made = 0u32;
    let mut may_have_run = false;
    loop {
        made += 1;
        let attempt = Request::from_parts(parts.clone(), Body::new(Full::new(message.clone())));
        if let Err(e) = std::future::poll_fn(|cx| inner.poll_ready(cx)).await {
            let failed = CallFailed::new(key, made, may_have_run, e.into());
            return Err(Box::new(failed));
        }
        let result = inner.call(attempt).await.map_err(Into::into);
        let attempted = attempt_of(&result);
        may_have_run = may_have_run
            || match &result {
                Ok(_) => matches!(attempted, Attempt::Answer { status: 409, .. }),
                Err(e) => !never_reached(&**e),
            };
        let decision =
            config
                .policy
                .decide(made, started.elapsed(), attempted, rand::random::<f64>());
        match decision {
            NextAttempt::Stop => {
                let result = result.map_err(|e| -> BoxError {
                    Box::new(CallFailed::new(key.clone(), made, may_have_run, e))
                });
                return result.map(|mut response| {
                    let how = CallReport::of(
                        key,
                        derived,
                        made,
                        response.headers(),
                        &http::HeaderName::from_static(idem_http::IDEMPOTENT_REPLAYED),
                    );
                    response.extensions_mut().insert(how);
                    response
                });
            }
            NextAttempt::RetryAfter(pause) => {
                tracing::debug!(target: "idem", key = %key, attempt = made, pause_ms = pause.as_millis(), "retrying the call with the same idempotency key");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// The delay of a `google.rpc.RetryInfo` in a trailers-only answer's
/// `grpc-status-details-bin` (base64, padded or not); nothing if that is
/// missing or not valid.
fn retry_info(headers: &http::HeaderMap) -> Option<Duration> {
    use base64::Engine as _;
    const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_encode_padding(false)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let details = BASE64
        .decode(headers.get("grpc-status-details-bin")?.as_bytes())
        .ok()?;
    idem_http::adapter::retry_delay_in_details(&details)
}

/// A call's outcome as the policy reads it: its code (from a trailers-only
/// answer's headers) as an HTTP status, with its pushback.
fn attempt_of(result: &Result<Response<Body>, BoxError>) -> Attempt {
    let Ok(response) = result else {
        return Attempt::NoAnswer;
    };
    let headers = response.headers();
    let code = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map_or(Code::Ok, Code::from);
    let pushback = match headers.get("grpc-retry-pushback-ms") {
        // gRFC A6: a pushback that is negative or not a number asks the
        // client not to retry at all.
        Some(v) => match v.to_str().ok().and_then(|v| v.parse::<u64>().ok()) {
            Some(ms) => Some(Duration::from_millis(ms)),
            None => {
                return Attempt::Answer {
                    status: 400,
                    retry_after: None,
                }
            }
        },
        // A server that sends only a `google.rpc.RetryInfo`.
        None => retry_info(headers),
    };
    let status = match code {
        Code::Aborted => 409,
        Code::Unavailable => 503,
        Code::DeadlineExceeded => 504,
        Code::ResourceExhausted if pushback.is_some() => 429,
        Code::Ok => 200,
        _ => 400,
    };
    Attempt::Answer {
        status,
        retry_after: pushback,
    }
}
