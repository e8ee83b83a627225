//! RFC 9457 problem details for every answer idem gives on its own.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
pub use idem_http::{ProblemKind, PROBLEM_TYPE_PREFIX};

/// A problem answer: `application/problem+json` with `type`, `title`,
/// `status` and `detail`, and `Retry-After` where retrying makes sense.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    kind: ProblemKind,
    detail: String,
    retry_after_secs: Option<u64>,
}

impl Problem {
    /// A problem of `kind` with a `detail` that says what to do.
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            retry_after_secs: None,
        }
    }

    /// Adds a `Retry-After` header, in whole seconds.
    #[must_use]
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// The kind.
    pub fn kind(&self) -> ProblemKind {
        self.kind
    }

    /// The detail.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The `application/problem+json` body.
    pub fn body(&self) -> String {
        idem_http::problem_body(self.kind, &self.detail)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body()));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
