//! Problems as actix-web responses: the same `application/problem+json`
//! answers as every idem adapter.

use actix_web::http::header::{CONTENT_TYPE, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use idem_http::Problem;

/// The response for `problem`: its status, `application/problem+json`, and
/// `Retry-After` where retrying makes sense.
pub(crate) fn problem_response(problem: &Problem) -> HttpResponse {
    let status =
        StatusCode::from_u16(problem.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = HttpResponse::build(status);
    builder.insert_header((CONTENT_TYPE, "application/problem+json"));
    if let Some(secs) = problem.retry_after_secs() {
        builder.insert_header((RETRY_AFTER, secs));
    }
    let mut response = builder.body(problem.body());
    // What `ProblemFormat` finds to render the answer another way.
    response.extensions_mut().insert(problem.clone());
    response
}
