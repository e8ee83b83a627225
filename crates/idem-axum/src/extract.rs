//! `Idempotent`: the extractor for handler-level idempotency.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use axum::extract::{FromRef, FromRequestParts};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use idem_core::{
    Call, Claim, Engine, Fingerprint, FingerprintBuilder, FingerprintError, IdempotencyKey,
    OnInFlight, Overrides, Scope,
};
use serde::Serialize;

use crate::headers::{key_from_headers, key_missing};
use crate::problem::Problem;
use crate::request_head::RequestHead;
use idem_http::RecordPolicy;

/// The idempotency context of one request, for handlers that make themselves
/// idempotent (and for the `#[idempotent]` attribute).
///
/// Extracting it requires an `Idempotency-Key` header (a missing or malformed
/// one is refused with 400 before the handler runs) and an [`Engine`] in the
/// router state (`Engine: FromRef<S>`). The handler then passes its scope and
/// its parsed input to [`run`](Self::run), which fingerprints them with the
/// method, route, path and query, and runs the operation once per key.
///
/// ```no_run
/// use axum::{extract::{FromRef, Path, State}, http::StatusCode, routing::post, Json, Router};
/// use idem_axum::Idempotent;
/// use idem_core::{Engine, MemoryStore};
/// use serde::Deserialize;
///
/// #[derive(Clone, FromRef)]
/// struct App { engine: Engine }
///
/// #[derive(Deserialize, serde::Serialize)]
/// struct Debit { amount: u64 }
///
/// async fn debit(
///     idem: Idempotent,
///     Path(account): Path<String>,
///     Json(req): Json<Debit>,
/// ) -> axum::response::Response {
///     // The operation outlives the request if the client hangs up (it is
///     // never cancelled half-way), so it owns what it uses.
///     let amount = req.amount;
///     idem.run(account.as_str(), &req, move |_claim| async move {
///         (StatusCode::CREATED, format!("debited {amount}"))
///     })
///     .await
/// }
///
/// let app: Router = Router::new()
///     .route("/accounts/{account}/debits", post(debit))
///     .with_state(App { engine: Engine::new(MemoryStore::new()) });
/// ```
#[derive(Clone, Debug)]
pub struct Idempotent {
    engine: Engine,
    head: RequestHead,
    key: IdempotencyKey,
    overrides: Overrides,
}

impl<S> FromRequestParts<S> for Idempotent
where
    Engine: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let key = key_from_headers(&parts.headers)?.ok_or_else(key_missing)?;
        Ok(Self {
            engine: Engine::from_ref(state),
            head: RequestHead::new(parts),
            key,
            overrides: Overrides::default(),
        })
    }
}

impl Idempotent {
    /// The request's key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// Names the operation in the fingerprint (default `"http"`): keep it
    /// stable across refactors, since a new name makes retries of old
    /// requests mismatch.
    #[must_use]
    pub fn operation(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.head.operation = name.into();
        self
    }

    /// Overrides the engine's record lifetime for this handler.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.overrides = self.overrides.ttl(ttl);
        self
    }

    /// Overrides the engine's lease for this handler.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.overrides = self.overrides.lease(lease);
        self
    }

    /// Overrides what a duplicate in flight gets (409, or waiting).
    #[must_use]
    pub fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.overrides = self.overrides.on_in_flight(on_in_flight);
        self
    }

    /// The largest response body recorded (default 1 MiB).
    #[must_use]
    pub fn max_response_body(mut self, bytes: usize) -> Self {
        self.head.settings.max_response_body = bytes;
        self
    }

    /// Which answers are recorded (default: all but 5xx).
    #[must_use]
    pub fn record(mut self, policy: RecordPolicy) -> Self {
        self.head.settings.record = policy;
        self
    }

    /// A fingerprint of this request's method, route, path and query, to
    /// which a handler adds its parsed inputs.
    pub fn fingerprint_builder(&self) -> FingerprintBuilder {
        self.head.builder()
    }

    /// The engine call for `input` under `scope`: what [`run`](Self::run) executes.
    pub fn call<I: Serialize + ?Sized>(
        &self,
        scope: impl Into<Scope>,
        input: &I,
    ) -> Result<Call, FingerprintError> {
        let mut fp = self.fingerprint_builder();
        fp.serialize("input", input)?;
        Ok(self.call_with(scope, fp.finish()))
    }

    /// The engine call for a finished fingerprint (see
    /// [`fingerprint_builder`](Self::fingerprint_builder)) under `scope`.
    pub fn call_with(&self, scope: impl Into<Scope>, fingerprint: Fingerprint) -> Call {
        Call::new(scope, self.key.clone(), fingerprint).with_overrides(self.overrides)
    }

    /// Runs `op` at most once for this key in `scope` and `input`, recording
    /// its response; a retry gets the recorded response back, byte for byte,
    /// with `Idempotent-Replayed: true`.
    ///
    /// `op` is never cancelled half-way (hence `Send + 'static`): if the client
    /// hangs up, the handler's future is dropped but `op` runs to its end and
    /// its response is recorded, so the client's retry gets the replay
    /// instead of a second execution.
    pub async fn run<I, F, Fut, R>(self, scope: impl Into<Scope>, input: &I, op: F) -> Response
    where
        I: Serialize + ?Sized,
        F: FnOnce(Claim) -> Fut + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoResponse,
    {
        match self.call(scope, input) {
            Ok(call) => self.run_call(call, op).await,
            Err(e) => fingerprint_failed(&e),
        }
    }

    /// Runs `op` for a prepared `call` (see [`call_with`](Self::call_with)),
    /// and as cancel-proof as [`run`](Self::run).
    pub fn run_call<F, Fut, R>(self, call: Call, op: F) -> impl Future<Output = Response> + Send
    where
        F: FnOnce(Claim) -> Fut + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoResponse,
    {
        self.head.respond(self.engine, call, op)
    }
}

/// The answer when a handler's inputs cannot be fingerprinted (a `Serialize`
/// impl failed): 500, since the request cannot be told apart from others.
pub fn fingerprint_failed(e: &FingerprintError) -> Response {
    tracing::error!(target: "idem", error = %e, "handler input cannot be fingerprinted");
    http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
}
