//! `Problem`: an answer idem gives on its own, and the ones every adapter
//! gives for the same events, worded once.

use std::borrow::Cow;

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use idem_core::{CommitError, Error, Outcome};

use crate::headers::KeyHeaderError;
use crate::problem_kind::{problem_body, ProblemKind};
use crate::record::encode;

/// `Retry-After` for a request in flight, in seconds. The first request
/// usually finishes long before its lease ends, and a retry then gets its
/// recorded response, so the wait is short rather than the lease's remainder
/// (which the engine's `Error::InFlight` still carries for other callers).
const IN_FLIGHT_RETRY_AFTER_SECS: u64 = 1;

/// A problem answer (RFC 9457): its kind, a `detail` that says what to do,
/// and a `Retry-After` where retrying makes sense. Adapters turn it into
/// their framework's response: status [`ProblemKind::status`], content type
/// `application/problem+json`, body [`Problem::body`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    kind: ProblemKind,
    detail: Cow<'static, str>,
    retry_after_secs: Option<u64>,
}

impl Problem {
    /// A problem of `kind` with a `detail` that says what to do.
    pub fn new(kind: ProblemKind, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            retry_after_secs: None,
        }
    }

    /// Adds a `Retry-After`, in whole seconds.
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

    /// The `Retry-After` in seconds, if retrying makes sense.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
    }

    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        self.kind.status()
    }

    /// The `application/problem+json` body.
    pub fn body(&self) -> String {
        problem_body(self.kind, &self.detail)
    }

    /// The problem as an `http` response whose body `body` makes of the
    /// problem's JSON: its status, `Content-Type: application/problem+json`,
    /// `Retry-After` where retrying makes sense, and the problem itself in
    /// the response's extensions, where [`ProblemFormat`](crate::ProblemFormat)
    /// finds it to render the answer in the application's format.
    pub fn response<B>(&self, body: impl FnOnce(Bytes) -> B) -> http::Response<B> {
        let mut response = http::Response::new(body(Bytes::from(self.body())));
        *response.status_mut() =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response.extensions_mut().insert(self.clone());
        response
    }

    /// The answer for a handler whose transaction did not commit with its
    /// record ([`Claim::commit`](idem_core::Claim::commit)): the claim was
    /// lost (rolled back, the key is another attempt's), the commit's answer
    /// was lost (uncertain), or nothing was applied (a conflict the adapter
    /// does not retry, or a record that could not be written).
    pub fn for_commit_error(e: &CommitError) -> Self {
        match e {
            CommitError::LeaseLost => Self::lease_lost_rolled_back(),
            CommitError::Uncertain(_) => Self::commit_uncertain(),
            _ => Self::not_recorded_rolled_back(),
        }
    }

    /// The answer for an engine error.
    pub fn for_error(e: &Error) -> Self {
        match e {
            Error::InFlight { .. } => Problem::new(
                ProblemKind::InFlight,
                "a request with this Idempotency-Key is still being processed; retry after the \
                 Retry-After delay to receive its response",
            )
            .retry_after(IN_FLIGHT_RETRY_AFTER_SECS),
            Error::Mismatch => Problem::new(
                ProblemKind::KeyReused,
                "this Idempotency-Key was already used with a different request (method, path, \
                 query or body); use a new key for a new request",
            ),
            Error::Expired => Problem::new(
                ProblemKind::KeyExpired,
                "a request with this Idempotency-Key was processed earlier, and its recorded \
                 response has expired, so it cannot be sent again; the request was not processed \
                 again. Use a new key to make it as a new request",
            ),
            Error::Store(e) if e.kind() == idem_core::StoreErrorKind::NewerFormat => {
                Self::record_format_newer()
            }
            Error::Store(_) => Problem::new(
                ProblemKind::StoreUnavailable,
                "the idempotency store could not be reached, so the request was not processed; \
                 retry later with the same Idempotency-Key",
            )
            .retry_after(1),
            Error::Overloaded { retry_after } => Problem::new(
                ProblemKind::Overloaded,
                "this server is running as many requests as it may at once, so the request was \
                 not processed; retry after the Retry-After delay with the same Idempotency-Key",
            )
            .retry_after(retry_after.as_secs().max(1)),
            Error::LeaseLost => Problem::new(
                ProblemKind::LeaseLost,
                "the request took longer than its claim and another attempt took it over; retry \
                 with the same Idempotency-Key to receive the recorded response",
            )
            .retry_after(1),
            _ => Problem::new(
                ProblemKind::ReplayUnreadable,
                "the response for this key could not be recorded or read back",
            ),
        }
    }

    /// A covered request came without the key.
    pub fn key_missing() -> Self {
        Problem::new(
            ProblemKind::KeyMissing,
            "this endpoint requires an Idempotency-Key header: send a unique value (a UUID, say) \
             with each new request and the same value when retrying it",
        )
    }

    /// A covered request came without a key in `header`, an adapter's own
    /// key header ([`key_missing`](Self::key_missing) for the default).
    pub fn key_missing_from(header: &str) -> Self {
        if header.eq_ignore_ascii_case(crate::IDEMPOTENCY_KEY) {
            return Self::key_missing();
        }
        Problem::new(
            ProblemKind::KeyMissing,
            format!(
                "this endpoint requires an idempotency key in the `{header}` header: send a \
                 unique value (a UUID, say) with each new request and the same value when \
                 retrying it"
            ),
        )
    }

    /// The key header was refused.
    pub fn key_malformed(e: &KeyHeaderError) -> Self {
        Problem::new(ProblemKind::KeyMalformed, e.to_string())
    }

    /// The key an endpoint takes from the request itself (not the header)
    /// is not a valid key.
    pub fn key_invalid(e: &dyn std::fmt::Display) -> Self {
        Problem::new(
            ProblemKind::KeyMalformed,
            format!(
                "the request's idempotency key (taken from the request by this endpoint) is not \
                 valid: {e}"
            ),
        )
    }

    /// The request body is over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Problem::new(
            ProblemKind::RequestTooLarge,
            format!("the request body is larger than the {limit} bytes this endpoint accepts"),
        )
    }

    /// The request body failed while it was read.
    pub fn body_unreadable(e: &dyn std::fmt::Display) -> Self {
        Problem::new(
            ProblemKind::BodyUnreadable,
            format!("the request body could not be read: {e}"),
        )
    }

    /// The handler panicked: its outcome is unknown and its claim kept.
    pub fn handler_failed() -> Self {
        Problem::new(
            ProblemKind::HandlerFailed,
            "the request failed while it was processed and may have taken effect; retrying with \
             the same Idempotency-Key answers 409 until the claim's lease ends, then runs the \
             request again",
        )
    }

    /// The request was processed, but its response (over `limit` bytes, or
    /// cut off) could not be recorded: what its retries get.
    pub fn not_recorded(limit: usize) -> Self {
        Problem::new(
            ProblemKind::ResponseNotRecorded,
            format!(
                "the request with this Idempotency-Key was processed, but its response (larger \
                 than the {limit} bytes this endpoint records, or cut off) could not be \
                 recorded; it was not processed again"
            ),
        )
    }

    /// The handler recorded its response in its own transaction, but its
    /// claim had been lost: the transaction was rolled back.
    pub fn lease_lost_rolled_back() -> Self {
        Problem::new(
            ProblemKind::LeaseLost,
            "the request took longer than its claim and another attempt took it over, so its \
             changes were rolled back; retry with the same Idempotency-Key to receive the \
             other attempt's response",
        )
        .retry_after(1)
    }

    /// The handler's response could not be recorded in its own
    /// transaction, which was rolled back.
    pub fn not_recorded_rolled_back() -> Self {
        Problem::new(
            ProblemKind::StoreUnavailable,
            "the request's changes could not be recorded and were rolled back; retry with the \
             same Idempotency-Key",
        )
        .retry_after(1)
    }

    /// The commit of the handler's transaction with its recorded response
    /// failed: whether it committed is unknown, and the claim is kept.
    pub fn commit_uncertain() -> Self {
        Problem::new(
            ProblemKind::CommitUncertain,
            "the request's changes may or may not have been committed; retry with the same \
             Idempotency-Key: it answers 409 until the request's claim ends, then the recorded \
             response if the changes were committed, or runs the request again if not",
        )
        .retry_after(1)
    }

    /// The record for the key was written by a newer version of idem, in a
    /// format this one does not read: mid-rollout, a retry reaches an
    /// instance that reads it.
    pub fn record_format_newer() -> Self {
        Problem::new(
            ProblemKind::RecordFormatNewer,
            "the record for this Idempotency-Key was written by a newer version of this service, \
             which this instance cannot read; the request was not processed again. Retry with \
             the same Idempotency-Key after the Retry-After delay",
        )
        .retry_after(1)
    }

    /// A recorded response could not be decoded.
    pub fn replay_unreadable() -> Self {
        Problem::new(
            ProblemKind::ReplayUnreadable,
            "the response recorded for this key cannot be read back; the request was not \
             processed again",
        )
    }
}

/// What a retry gets for a response that was served but could not be
/// recorded (larger than `limit`, or its body failed): a recorded
/// `response-not-recorded` problem, so the handler is never run again.
pub fn not_recorded(limit: usize) -> Outcome {
    let problem = Problem::not_recorded(limit);
    encode(
        problem.status(),
        &[("content-type", b"application/problem+json")],
        problem.body().as_bytes(),
    )
}
