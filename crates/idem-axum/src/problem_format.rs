//! `problem_format`: idem's own answers in the application's error format.

use axum::response::Response;

use crate::problem::Problem;

/// A layer that renders idem's own answers with `render`: every response
/// idem gave on its own (a missing or malformed key, a duplicate in
/// flight, a reused key, a store that is down, a handler that panicked,
/// ...) is replaced by `render(&problem)`, and a `Retry-After` the
/// rendered response lacks is added from the problem. Every other
/// response passes untouched, whatever its status. Put it outside
/// [`IdempotencyLayer`](crate::IdempotencyLayer), or on the router whose
/// handlers carry `#[idempotent]`:
///
/// ```no_run
/// use axum::response::{IntoResponse, Response};
/// use axum::{routing::post, Json, Router};
///
/// // Stripe's shape: {"error": {"type", "code", "message"}}.
/// fn stripe_error(problem: &idem_axum::Problem) -> Response {
///     let body = serde_json::json!({"error": {
///         "type": "idempotency_error",
///         "code": problem.kind().slug(),
///         "message": problem.detail(),
///     }});
///     (problem.status(), Json(body)).into_response()
/// }
///
/// let engine = idem_core::Engine::new(idem_core::MemoryStore::new());
/// let app: Router = Router::new()
///     .route("/v1/charges", post(|| async { "charged" }))
///     .layer(idem_axum::IdempotencyLayer::new(engine))
///     .layer(idem_axum::problem_format(stripe_error));
/// ```
pub fn problem_format<F>(
    render: F,
) -> idem_http::ProblemFormat<impl Fn(&idem_http::Problem) -> Response + Clone>
where
    F: Fn(&Problem) -> Response + Clone,
{
    idem_http::ProblemFormat::new(move |problem: &idem_http::Problem| {
        render(&Problem::from(problem.clone()))
    })
}
