//! `ProblemError`: a problem answer (RFC 9457) read by the caller, typed
//! when it is one of idem's.

use std::time::Duration;

use idem_http::ProblemKind;

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
                        | ProblemKind::Overloaded
                        | ProblemKind::CommitUncertain
                )
            )
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
