//! RFC 9457 problem details for every answer idem gives on its own.

use std::borrow::Cow;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
pub use idem_http::{ProblemKind, PROBLEM_TYPE_PREFIX};

/// A problem answer: `application/problem+json` with `type`, `title`,
/// `status` and `detail`, and `Retry-After` where retrying makes sense. The
/// answer itself is [`idem_http::Problem`], shared by every adapter; this
/// makes it an axum response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem(idem_http::Problem);

impl Problem {
    /// A problem of `kind` with a `detail` that says what to do.
    pub fn new(kind: ProblemKind, detail: impl Into<Cow<'static, str>>) -> Self {
        Self(idem_http::Problem::new(kind, detail))
    }

    /// Adds a `Retry-After` header, in whole seconds.
    #[must_use]
    pub fn retry_after(self, secs: u64) -> Self {
        Self(self.0.retry_after(secs))
    }

    /// The kind.
    pub fn kind(&self) -> ProblemKind {
        self.0.kind()
    }

    /// The detail.
    pub fn detail(&self) -> &str {
        self.0.detail()
    }

    /// The `application/problem+json` body.
    pub fn body(&self) -> String {
        self.0.body()
    }

    /// The `Retry-After` in whole seconds, if retrying makes sense.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.0.retry_after_secs()
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<idem_http::Problem> for Problem {
    fn from(problem: idem_http::Problem) -> Self {
        Self(problem)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        // The problem rides in the extensions, where `problem_format` finds
        // it to render the answer another way.
        self.0.response(Body::from)
    }
}
