//! What the middleware tells the caller: how a logical request went
//! ([`Idempotency`], in the response's extensions), and idem's problems as
//! a typed error ([`ResponseExt::error_for_problem`]).

use std::time::Duration;

use idem_http::ProblemKind;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::Response;

/// How a logical request went, in its response's extensions
/// ([`ResponseExt::idempotency`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idempotency {
    /// The key every attempt carried.
    pub key: String,
    /// Whether the key was derived from the claim of the operation that
    /// made the request ([`IdempotencyMiddleware::propagate`](crate::IdempotencyMiddleware::propagate)).
    pub derived: bool,
    /// How many attempts were made, the first included.
    pub attempts: u32,
    /// Whether the answer is a replay of an earlier attempt's outcome
    /// (`Idempotent-Replayed: true`, or the header named by
    /// [`IdempotencyMiddleware::replay_header`](crate::IdempotencyMiddleware::replay_header)):
    /// the request had run before.
    pub replayed: bool,
}

impl Idempotency {
    /// How a call went, from the key it carried and the answer's headers
    /// (`<replay header>: true` marks a replay).
    pub(crate) fn of(
        key: String,
        derived: bool,
        attempts: u32,
        headers: &http::HeaderMap,
        replay_header: &http::HeaderName,
    ) -> Self {
        let replayed = headers
            .get(replay_header)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        Self {
            key,
            derived,
            attempts,
            replayed,
        }
    }
}

/// A problem answer (RFC 9457), typed when it is one of idem's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{status} {}: {detail}", title.as_deref().unwrap_or("problem"))]
pub struct ProblemError {
    /// Which of idem's rules, if the `type` is one of idem's.
    pub kind: Option<ProblemKind>,
    /// The `type` URI as sent (`about:blank` if none).
    pub type_uri: String,
    /// The HTTP status.
    pub status: u16,
    /// The `title`, if sent.
    pub title: Option<String>,
    /// The `detail`, or the body if it was not problem+json.
    pub detail: String,
    /// The `Retry-After` header, if sent.
    pub retry_after: Option<Duration>,
}

impl ProblemError {
    /// Whether the request can be sent again later with the same key and
    /// may succeed: every answer the default [`RetryPolicy`](crate::RetryPolicy)
    /// retries (409 in flight, with or without `Retry-After`; 429; 5xx), an
    /// answer that came with `Retry-After`, and idem's in-flight, store-down
    /// and commit-uncertain problems. `key-reused`, `key-malformed` and the
    /// other 4xx never can.
    pub fn is_retryable(&self) -> bool {
        let attempt = crate::policy::Attempt::Answer {
            status: self.status,
            retry_after: self.retry_after,
        };
        crate::RetryPolicy::default().retries(attempt)
            || self.retry_after.is_some()
            || matches!(
                self.kind,
                Some(
                    ProblemKind::InFlight
                        | ProblemKind::StoreUnavailable
                        | ProblemKind::CommitUncertain
                )
            )
    }
}

/// What idem's middleware added to a `reqwest::Response`.
#[async_trait::async_trait]
pub trait ResponseExt: Sized {
    /// How the logical request went, if the middleware covered it.
    fn idempotency(&self) -> Option<&Idempotency>;

    /// The response if it is a success (below 400); else its body read as
    /// a problem, typed when it is one of idem's.
    async fn error_for_problem(self) -> Result<Response, ProblemError>;
}

#[async_trait::async_trait]
impl ResponseExt for Response {
    fn idempotency(&self) -> Option<&Idempotency> {
        self.extensions().get::<Idempotency>()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Attempt;
    use crate::RetryPolicy;

    fn problem(
        status: u16,
        kind: Option<ProblemKind>,
        retry_after: Option<Duration>,
    ) -> ProblemError {
        ProblemError {
            kind,
            type_uri: "about:blank".into(),
            status,
            title: None,
            detail: String::new(),
            retry_after,
        }
    }

    #[test]
    fn what_is_retryable_is_what_the_default_policy_retries() {
        let policy = RetryPolicy::default();
        for status in 400..600 {
            let answer = Attempt::Answer {
                status,
                retry_after: None,
            };
            assert_eq!(
                problem(status, None, None).is_retryable(),
                policy.retries(answer),
                "{status}"
            );
        }
        // A 409 in flight from a server that sends no Retry-After (a
        // third-party middleware) is retryable: the work may still run.
        assert!(problem(409, None, None).is_retryable());
        assert!(problem(409, Some(ProblemKind::InFlight), None).is_retryable());
        assert!(!problem(422, Some(ProblemKind::KeyReused), None).is_retryable());
        assert!(problem(400, None, Some(Duration::from_secs(1))).is_retryable());
    }
}
