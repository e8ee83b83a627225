//! `ProblemFormat`: idem's own answers in the application's error format,
//! as actix-web middleware.

use std::future::{ready, Ready};
use std::rc::Rc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use actix_web::HttpResponse;
use futures_util::future::LocalBoxFuture;
use idem_http::Problem;

/// Renders idem's own answers with `render`: every response idem gave on
/// its own (a missing or malformed key, a duplicate in flight, a reused
/// key, a store that is down, ...) is replaced by `render(&problem)`; the
/// [`Problem`] says what happened (kind, status, detail, `Retry-After`).
/// A `Retry-After` the rendered response lacks is added from the problem.
/// Every other response passes untouched. Wrap it outside
/// [`Idempotency`](crate::Idempotency) (registered after it), or around
/// the routes whose handlers carry `#[idempotent]`:
///
/// ```no_run
/// use actix_web::{web, App, HttpResponse};
/// use idem_actix::{Idempotency, ProblemFormat};
///
/// let render = |problem: &idem_actix::Problem| {
///     HttpResponse::build(actix_web::http::StatusCode::from_u16(problem.status()).unwrap_or_default())
///         .json(serde_json::json!({"error": {"type": problem.kind().slug(), "message": problem.detail()}}))
/// };
/// let engine = idem_core::Engine::new(idem_core::MemoryStore::new());
/// let app = App::new()
///     .wrap(Idempotency::new(engine))
///     .wrap(ProblemFormat::new(render))
///     .route("/charges", web::post().to(|| async { "charged" }));
/// ```
pub struct ProblemFormat<F> {
    render: Rc<F>,
}

impl<F> ProblemFormat<F> {
    /// The middleware, rendering with `render`.
    pub fn new(render: F) -> Self {
        Self {
            render: Rc::new(render),
        }
    }
}

impl<S, B, F> Transform<S, ServiceRequest> for ProblemFormat<F>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
    F: Fn(&Problem) -> HttpResponse + 'static,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Transform = ProblemFormatMiddleware<S, F>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(ProblemFormatMiddleware {
            service,
            render: Rc::clone(&self.render),
        }))
    }
}

/// The service [`ProblemFormat`] wraps around the routes.
pub struct ProblemFormatMiddleware<S, F> {
    service: S,
    render: Rc<F>,
}

impl<S, B, F> Service<ServiceRequest> for ProblemFormatMiddleware<S, F>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
    F: Fn(&Problem) -> HttpResponse + 'static,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<ServiceResponse<BoxBody>, actix_web::Error>>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let answer = self.service.call(req);
        let render = Rc::clone(&self.render);
        Box::pin(async move {
            let response = answer.await?;
            let Some(problem) = response.response().extensions().get::<Problem>().cloned() else {
                return Ok(response.map_into_boxed_body());
            };
            let (request, _) = response.into_parts();
            let mut rendered = render(&problem);
            if let Some(secs) = problem.retry_after_secs() {
                if !rendered.headers().contains_key(RETRY_AFTER) {
                    rendered
                        .headers_mut()
                        .insert(RETRY_AFTER, HeaderValue::from(secs));
                }
            }
            rendered.extensions_mut().insert(problem);
            Ok(ServiceResponse::new(request, rendered))
        })
    }
}
