//! `HandlerContext`: what the `#[idempotent]` attribute's handler form
//! extracts first and runs the handler through. Not a public API.

use std::borrow::Cow;
use std::future::Future;

use axum::extract::{FromRef, FromRequestParts};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use idem_core::{Call, Claim, Engine, FingerprintBuilder, IdempotencyKey};

use crate::headers::{is_json, key_from_headers, key_missing};
use crate::problem::Problem;
use crate::request_head::RequestHead;

/// What the attribute's generated handler extracts before the user's
/// extractors: the router state (for its engine) and the request.
///
/// The handler is generic over the router state `S` and asks
/// `S: EngineInState` in its `where` clause, so that a router whose state
/// has no engine is told so where the handler is routed, in one error
/// naming `Engine` and `FromRef`, instead of failing axum's `Handler` bound.
#[derive(Debug)]
pub struct HandlerContext<S> {
    state: S,
    request: HandlerRequest,
}

/// The request as the generated handler sees it before the user's code
/// runs: what the fingerprint starts from.
#[derive(Debug)]
pub struct HandlerRequest {
    head: RequestHead,
    json: bool,
}

/// The `Idempotency-Key` header of a handler whose key comes from it,
/// extracted right after the context and before the user's extractors: a
/// request without a valid key is answered 400 before its body is read, so
/// a client that sent `Expect: 100-continue` is never asked for the body.
#[derive(Debug)]
pub struct HeaderKey(IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for HeaderKey {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match key_from_headers(&parts.headers) {
            Ok(Some(key)) => Ok(Self(key)),
            Ok(None) => Err(key_missing().into_response()),
            Err(problem) => Err(problem.into_response()),
        }
    }
}

impl HeaderKey {
    /// The key, as the other key sources give it.
    pub fn into_key(self) -> Result<IdempotencyKey, Problem> {
        Ok(self.0)
    }
}

/// What an `#[idempotent]` axum handler returns: any `IntoResponse`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an HTTP response, which an `#[idempotent]` axum handler returns",
    label = "not `IntoResponse`",
    note = "`idem_axum::idempotent` without `engine = ...` makes an axum handler; for a function that is not a handler (a queue consumer), add `engine = <expression>` and `key = <expression>`, or use `idem_core::idempotent`"
)]
pub trait HandlerResponse {
    /// The response.
    fn into_handler_response(self) -> Response;
}

#[diagnostic::do_not_recommend]
impl<T: IntoResponse> HandlerResponse for T {
    fn into_handler_response(self) -> Response {
        self.into_response()
    }
}

/// The router state of an `#[idempotent]` handler must hold an engine.
#[diagnostic::on_unimplemented(
    message = "the router state `{Self}` has no `idem_core::Engine`, which `#[idempotent]` handlers take from it",
    label = "routed with state `{Self}`, which has no `Engine`",
    note = "add a field `engine: idem_core::Engine` to `{Self}` and `#[derive(axum::extract::FromRef)]`, or implement `axum::extract::FromRef<{Self}> for idem_core::Engine`"
)]
pub trait EngineInState: Clone + Send + Sync + 'static {
    /// The engine.
    fn engine(&self) -> Engine;
}

#[diagnostic::do_not_recommend]
impl<S> EngineInState for S
where
    Engine: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    fn engine(&self) -> Engine {
        Engine::from_ref(self)
    }
}

impl<S> FromRequestParts<S> for HandlerContext<S>
where
    S: Clone + Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            state: state.clone(),
            request: HandlerRequest {
                head: RequestHead::new(parts),
                json: is_json(&parts.headers),
            },
        })
    }
}

impl<S> HandlerContext<S> {
    /// The stable name of the operation.
    #[must_use]
    pub fn operation(mut self, name: &'static str) -> Self {
        self.request.head.operation = Cow::Borrowed(name);
        self
    }

    /// The response of a handler that ran without a key
    /// (`key_required = false`), as it would without the attribute.
    pub fn unclaimed(self, response: Response) -> Response {
        response
    }

    /// The request.
    pub fn request(&self) -> &HandlerRequest {
        &self.request
    }

    /// Runs `op` once for `call` (built by the generated code from the key,
    /// the scope, the finished fingerprint and the attribute's overrides),
    /// recording its response (see [`Idempotent::run`](crate::Idempotent::run)).
    ///
    /// Not an `async fn`: it would hold its arguments twice and the whole of
    /// the answer's future inside its own, and the handler's future (which
    /// axum boxes and moves) would grow by kilobytes. It returns the
    /// answer's future itself.
    pub fn run<F, Fut, R>(self, call: Call, op: F) -> impl Future<Output = Response> + Send
    where
        S: EngineInState,
        F: FnOnce(Claim) -> Fut + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoResponse,
    {
        let engine = self.state.engine();
        drop(self.state);
        self.request.head.respond(engine, call, op)
    }
}

impl HandlerRequest {
    /// The largest request body read for the fingerprint.
    pub fn max_request_body(&self) -> usize {
        self.head.settings.max_request_body
    }

    /// Whether the request body is JSON (compared parsed).
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// The fingerprint so far: operation, method, route, path and query.
    pub fn builder(&self) -> FingerprintBuilder {
        self.head.builder()
    }

    /// The key from the attribute's `key = ...` expression: 400 if its value
    /// is not a valid key (empty, too long, not visible ASCII).
    pub fn expression_key<T: idem_core::__private::KeyValue + ?Sized>(
        &self,
        value: &T,
    ) -> Result<IdempotencyKey, Problem> {
        value
            .key_value()
            .map_err(|e| idem_http::Problem::key_invalid(&e).into())
    }
}
