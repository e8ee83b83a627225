//! `ResponseExt`: what idem's middleware added to a `reqwest::Response`:
//! its [`CallReport`], and idem's problems as a typed error.

use std::time::Duration;

use idem_http::ProblemKind;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::Response;

use crate::call_report::CallReport;
use crate::problem_error::ProblemError;

/// What idem's middleware added to a `reqwest::Response`.
#[async_trait::async_trait]
pub trait ResponseExt: Sized {
    /// How the logical request went, if the middleware covered it.
    fn call_report(&self) -> Option<&CallReport>;

    /// The response if it is a success (below 400); else its body read as
    /// a problem, typed when it is one of idem's.
    async fn error_for_problem(self) -> Result<Response, ProblemError>;
}

#[async_trait::async_trait]
impl ResponseExt for Response {
    fn call_report(&self) -> Option<&CallReport> {
        self.extensions().get::<CallReport>()
    }

    async fn error_for_problem(self) -> Result<Response, ProblemError> {
        let status = self.status().as_u16();
        if status < 400 {
            return Ok(self);
        }
        let retry_after = self
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let is_problem = self
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/problem+json"));
        let body = self.text().await.unwrap_or_default();
        let parsed = is_problem
            .then(|| serde_json::from_str::<serde_json::Value>(&body).ok())
            .flatten();
        let field = |name: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(name))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let type_uri = field("type").unwrap_or_else(|| "about:blank".to_owned());
        Err(ProblemError {
            kind: ProblemKind::from_type(&type_uri),
            title: field("title"),
            detail: field("detail").unwrap_or(body),
            type_uri,
            status,
            retry_after,
        })
    }
}
