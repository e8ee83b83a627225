//! `problem_format`: idem's own refusals in the service's own error model.

use idem_http::Problem;
use tonic::body::Body;
use tonic::Status;

/// A layer that answers idem's own refusals (a missing or malformed key,
/// a duplicate in flight, a reused key, a store that is down, ...) with
/// `render(&problem)` instead of idem's statuses: for a service whose
/// clients read errors in a model of its own (its codes, its messages,
/// its details). Every other answer passes untouched. A `retry-after` the
/// rendered status lacks is added from the problem; add
/// [`RETRY_PUSHBACK_MS`](crate::RETRY_PUSHBACK_MS) yourself if the
/// service's clients use gRPC's own retry policies. Add it before
/// [`IdempotencyLayer`](crate::IdempotencyLayer), so that it is outside:
///
/// ```no_run
/// use idem_tonic::{problem_format, IdempotencyLayer};
/// use tonic::{Code, Status};
///
/// let render = |problem: &idem_tonic::Problem| {
///     let code = match problem.kind() {
///         idem_tonic::ProblemKind::InFlight => Code::Unavailable,
///         _ => idem_tonic::code(problem.kind()),
///     };
///     Status::new(code, format!("payments/{}: {}", problem.kind().slug(), problem.detail()))
/// };
/// let engine = idem_core::Engine::new(idem_core::MemoryStore::new());
/// let server = tonic::transport::Server::builder()
///     .layer(problem_format(render))
///     .layer(IdempotencyLayer::new(engine));
/// ```
pub fn problem_format<F>(
    render: F,
) -> idem_http::ProblemFormat<impl Fn(&Problem) -> http::Response<Body> + Clone>
where
    F: Fn(&Problem) -> Status + Clone,
{
    idem_http::ProblemFormat::new(move |problem: &Problem| render(problem).into_http::<Body>())
}
