//! `HandlerContext`: what the `#[idempotent]` attribute's actix-web
//! handlers extract and run through. Not a public API.

use std::borrow::Cow;
use std::future::Future;

use actix_web::dev::Payload;
use actix_web::error::{ErrorInternalServerError, InternalError};
use actix_web::http::header::CONTENT_TYPE;
use actix_web::web::Data;
use actix_web::{FromRequest, HttpRequest, HttpResponse, Responder};
use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use idem_core::{Call, Claim, Engine, FingerprintBuilder, IdempotencyKey, IgnoredFields};
use idem_http::adapter::{add_body, is_json, key_from_values, request_fingerprint};
use idem_http::{Problem, Settings, IDEMPOTENCY_KEY};

use crate::body::read_body;
use crate::problem::problem_response;
use crate::respond::respond;

/// What an attribute's handler answers.
pub type Response = HttpResponse;

/// The `Idempotency-Key` header of a handler whose key comes from it: the
/// generated handler's first extractor, so that a request without a valid
/// key is answered 400 before its body is read (actix-web extracts a
/// handler's parameters in order, and the context reads the body).
#[derive(Debug)]
pub struct HeaderKey(IdempotencyKey);

impl FromRequest for HeaderKey {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(match header_key(req) {
            Ok(Some(key)) => Ok(Self(key)),
            Ok(None) => Err(refused(&Problem::key_missing())),
            Err(refusal) => Err(refusal),
        })
    }
}

impl HeaderKey {
    /// The key, as the other key sources give it.
    pub fn into_key(self) -> Result<IdempotencyKey, Problem> {
        Ok(self.0)
    }
}

/// The request's `Idempotency-Key`, if it sent one; a malformed one is
/// refused (400).
pub(crate) fn header_key(req: &HttpRequest) -> Result<Option<IdempotencyKey>, actix_web::Error> {
    key_from_values(
        req.headers()
            .get_all(IDEMPOTENCY_KEY)
            .map(actix_web::http::header::HeaderValue::as_bytes),
    )
    .map_err(|e| refused(&Problem::key_malformed(&e)))
}

pub(crate) fn refused(problem: &Problem) -> actix_web::Error {
    InternalError::from_response("idem", problem_response(problem)).into()
}

/// The generated handler's extractor after the key: the engine (from the app data)
/// and the whole request, body included, from which the user's extractors
/// are then extracted.
#[derive(Debug)]
pub struct HandlerContext {
    /// From the app data, if it holds one as `Engine` or `Data<Engine>`;
    /// else from a parameter (see [`EngineProbe`]).
    engine: Option<Engine>,
    request: HandlerRequest,
}

/// The request as the generated handler sees it before the user's code
/// runs.
#[derive(Debug)]
pub struct HandlerRequest {
    req: HttpRequest,
    body: Bytes,
    operation: Cow<'static, str>,
    settings: Settings,
}

/// What an `#[idempotent]` actix-web handler returns: any `Responder`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an HTTP response, which an `#[idempotent]` actix-web handler returns",
    label = "not `actix_web::Responder`",
    note = "`idem_actix::idempotent` without `engine = ...` makes an actix-web handler; for a function that is not a handler (a queue consumer), add `engine = <expression>` and `key = <expression>`, or use `idem_core::idempotent`"
)]
pub trait HandlerResponse {
    /// The response, once the request it answers is known.
    fn into_handler_response(self) -> Responded;
}

#[diagnostic::do_not_recommend]
impl<T: Responder + 'static> HandlerResponse for T {
    fn into_handler_response(self) -> Responded {
        Responded(Box::new(move |req| {
            self.respond_to(req).map_into_boxed_body()
        }))
    }
}

/// A handler's `Responder`, to be turned into the response for its
/// request.
pub struct Responded(Box<dyn FnOnce(&HttpRequest) -> HttpResponse>);

impl std::fmt::Debug for Responded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responded").finish_non_exhaustive()
    }
}

/// A problem as the handler's answer.
pub trait IntoResponse {
    /// The response.
    fn into_response(self) -> HttpResponse;
}

impl IntoResponse for Problem {
    fn into_response(self) -> HttpResponse {
        problem_response(&self)
    }
}

const NO_ENGINE: &str = "no idem_core::Engine for this #[idempotent] handler: put it in the app \
     data (`App::new().app_data(engine.clone())`, or `web::Data<Engine>`), or keep it in the \
     state the handler takes as `web::Data<S>` and implement `AsRef<idem_core::Engine>` for `S`";

/// One of the handler's parameters, asked whether it holds the engine: a
/// `web::Data<S>` whose `S` is `AsRef<Engine>` (the application's own
/// state, holding its engine) does. The generated code asks each parameter
/// with `(&&EngineProbe(&param)).engine()`; the answer is decided by the
/// parameter's type, at compile time.
#[derive(Debug)]
pub struct EngineProbe<'a, T>(pub &'a T);

/// A `web::Data<S>` parameter with `S: AsRef<Engine>` holds the engine.
pub trait EngineInData {
    /// The engine.
    fn engine(&self) -> Option<Engine>;
}

impl<S: AsRef<Engine> + ?Sized + 'static> EngineInData for &EngineProbe<'_, Data<S>> {
    fn engine(&self) -> Option<Engine> {
        Some(self.0.get_ref().as_ref().clone())
    }
}

/// Any other parameter holds no engine.
pub trait NoEngine {
    /// None.
    fn engine(&self) -> Option<Engine>;
}

impl<T> NoEngine for EngineProbe<'_, T> {
    fn engine(&self) -> Option<Engine> {
        None
    }
}

fn engine_of(req: &HttpRequest) -> Option<Engine> {
    req.app_data::<Engine>()
        .cloned()
        .or_else(|| req.app_data::<Data<Engine>>().map(|d| d.get_ref().clone()))
}

impl FromRequest for HandlerContext {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let payload = payload.take();
        Box::pin(async move {
            let engine = engine_of(&req);
            let settings = Settings::default();
            let body = read_body(&req, payload, settings.max_request_body)
                .await
                .map_err(|p| refused(&p))?;
            Ok(Self {
                engine,
                request: HandlerRequest {
                    req,
                    body,
                    operation: Cow::Borrowed("http"),
                    settings,
                },
            })
        })
    }
}

impl HandlerContext {
    /// The stable name of the operation.
    #[must_use]
    pub fn operation(mut self, name: &'static str) -> Self {
        self.request.operation = Cow::Borrowed(name);
        self
    }

    /// The request.
    pub fn request(&self) -> &HandlerRequest {
        &self.request
    }

    /// The engine, unless the app data held one: the first a parameter
    /// holds (see [`EngineProbe`]).
    #[must_use]
    pub fn engine_from(mut self, held: impl IntoIterator<Item = Option<Engine>>) -> Self {
        if self.engine.is_none() {
            self.engine = held.into_iter().flatten().next();
        }
        self
    }

    /// One of the user's extractors, from the request and its body.
    pub async fn extract<T: FromRequest>(&self) -> Result<T, HttpResponse> {
        let mut payload = Payload::from(self.request.body.clone());
        T::from_request(&self.request.req, &mut payload)
            .await
            .map_err(|e| e.into().error_response())
    }

    /// The response of a handler that ran without a key
    /// (`key_required = false`), as it would without the attribute.
    pub fn unclaimed(self, responded: Responded) -> HttpResponse {
        (responded.0)(&self.request.req)
    }

    /// Runs `op` once for `call` (built by the generated code from the key,
    /// the scope, the finished fingerprint and the attribute's overrides),
    /// recording its response.
    pub async fn run<F, Fut>(self, call: Call, op: F) -> HttpResponse
    where
        F: FnOnce(Claim) -> Fut + 'static,
        Fut: Future<Output = Responded> + 'static,
    {
        let HandlerRequest {
            req,
            operation,
            settings,
            ..
        } = self.request;
        let Some(engine) = self.engine else {
            tracing::error!(target: "idem", path = req.path(), "an #[idempotent] handler found no idem_core::Engine");
            return ErrorInternalServerError(NO_ENGINE).error_response();
        };
        let call = call.with_operation(operation);
        let answer = respond(engine, call, settings, move |claim| async move {
            let responded = op(claim).await;
            Ok((responded.0)(&req))
        })
        .await;
        answer.unwrap_or_else(|e| e.error_response())
    }
}

impl HandlerRequest {
    /// The fingerprint so far: operation, method, route pattern, path,
    /// query and body (parsed when JSON), as the middleware takes it.
    pub fn builder(&self) -> FingerprintBuilder {
        let route = self.req.match_pattern();
        let mut fp = request_fingerprint(
            &self.operation,
            self.req.method().as_str(),
            route.as_deref(),
            self.req.path(),
            Some(self.req.query_string()),
        );
        let json = is_json(
            self.req
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        add_body(&mut fp, "body", json, &self.body, &IgnoredFields::NONE);
        fp
    }

    /// The key from the attribute's `key = ...` expression: 400 if its value
    /// is not a valid key (empty, too long, not visible ASCII).
    pub fn expression_key<T: idem_core::__private::KeyValue + ?Sized>(
        &self,
        value: &T,
    ) -> Result<IdempotencyKey, Problem> {
        value
            .key_value()
            .map_err(|e| idem_http::Problem::key_invalid(&e))
    }
}
