//! The problems idem answers with on its own (RFC 9457): their kinds, and the
//! `application/problem+json` body.

/// The prefix of every problem `type` URI idem emits.
pub const PROBLEM_TYPE_PREFIX: &str = "urn:idem:problem:";

/// Which rule of the idempotency policy a request broke. Each kind has a
/// stable `type` URI (`urn:idem:problem:<slug>`), a status and a title.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// 400: the route requires an `Idempotency-Key` header and none was sent.
    KeyMissing,
    /// 400: the key is empty, longer than 255 characters, not visible ASCII,
    /// a badly quoted string, or sent more than once.
    KeyMalformed,
    /// 409: a request with this key is still being processed.
    InFlight,
    /// 422: the key was already used with a different request.
    KeyReused,
    /// 412: a late retry. The key's request completed earlier, but its
    /// recorded response has expired; a trace of it (kept for the store's
    /// trace window) refuses to process it again. 412, as the OASIS
    /// Repeatable Requests specification answers a request repeated past
    /// the server's tracking window: the precondition of a retry, that its
    /// response is still kept, failed. Not 410, which says the endpoint
    /// itself is gone and is cacheable by default.
    KeyExpired,
    /// 413: the request body is larger than the configured limit.
    RequestTooLarge,
    /// 400: the request body could not be read.
    BodyUnreadable,
    /// 503: the idempotency store cannot be reached; nothing was processed.
    StoreUnavailable,
    /// 503: the server runs as many requests as it may at once
    /// (`Engine::with_max_in_flight`); nothing was processed, and a retry
    /// after `Retry-After` may find room.
    Overloaded,
    /// 409: the request's claim expired and was taken over before its
    /// response was recorded: its response was not recorded (and, under
    /// `idem_axum::commit_response`, its writes were rolled
    /// back).
    LeaseLost,
    /// 503: the request's database transaction failed to commit, and whether
    /// it committed is unknown (the connection may have failed after the
    /// commit): the key answers 409 until the claim's lease ends, then
    /// replays the response if the commit was applied, or runs again.
    CommitUncertain,
    /// 500: a recorded response could not be read back.
    ReplayUnreadable,
    /// 503: the key's record was written by a newer version of idem, in a
    /// format this one does not read (a rollout in progress); nothing was
    /// processed, and a retry reaches an upgraded instance.
    RecordFormatNewer,
    /// 500: the handler panicked while it ran; its outcome is unknown, so the
    /// key stays claimed until the lease ends.
    HandlerFailed,
    /// 500, replayed: the request was processed, but its response could not
    /// be recorded (larger than the limit, or its body failed); retries get
    /// this instead of a second execution.
    ResponseNotRecorded,
    /// 400: the request was malformed (a body that does not parse, a bad path
    /// or query parameter); the detail says what.
    BadRequest,
    /// 404: no such route.
    NotFound,
    /// 405: the route does not take this method (see `Allow`).
    MethodNotAllowed,
    /// 415: the body's content type is not the one the route takes.
    UnsupportedMediaType,
    /// 422: the body parsed but does not have the expected shape or values.
    BodyInvalid,
}

impl ProblemKind {
    /// Every kind.
    pub const ALL: [ProblemKind; 20] = [
        ProblemKind::KeyMissing,
        ProblemKind::KeyMalformed,
        ProblemKind::InFlight,
        ProblemKind::KeyReused,
        ProblemKind::KeyExpired,
        ProblemKind::RequestTooLarge,
        ProblemKind::BodyUnreadable,
        ProblemKind::StoreUnavailable,
        ProblemKind::Overloaded,
        ProblemKind::LeaseLost,
        ProblemKind::CommitUncertain,
        ProblemKind::ReplayUnreadable,
        ProblemKind::RecordFormatNewer,
        ProblemKind::HandlerFailed,
        ProblemKind::ResponseNotRecorded,
        ProblemKind::BadRequest,
        ProblemKind::NotFound,
        ProblemKind::MethodNotAllowed,
        ProblemKind::UnsupportedMediaType,
        ProblemKind::BodyInvalid,
    ];

    /// The kind a problem `type` URI names (`urn:idem:problem:<slug>`);
    /// `None` for another API's problem type.
    pub fn from_type(type_uri: &str) -> Option<Self> {
        let slug = type_uri.strip_prefix(PROBLEM_TYPE_PREFIX)?;
        Self::ALL.into_iter().find(|k| k.slug() == slug)
    }

    /// The slug in the `type` URI.
    pub fn slug(self) -> &'static str {
        match self {
            ProblemKind::KeyMissing => "key-missing",
            ProblemKind::KeyMalformed => "key-malformed",
            ProblemKind::InFlight => "request-in-flight",
            ProblemKind::KeyReused => "key-reused",
            ProblemKind::KeyExpired => "key-expired",
            ProblemKind::RequestTooLarge => "request-too-large",
            ProblemKind::BodyUnreadable => "body-unreadable",
            ProblemKind::StoreUnavailable => "store-unavailable",
            ProblemKind::Overloaded => "overloaded",
            ProblemKind::LeaseLost => "lease-lost",
            ProblemKind::CommitUncertain => "commit-uncertain",
            ProblemKind::ReplayUnreadable => "replay-unreadable",
            ProblemKind::RecordFormatNewer => "record-format-newer",
            ProblemKind::HandlerFailed => "handler-failed",
            ProblemKind::ResponseNotRecorded => "response-not-recorded",
            ProblemKind::BadRequest => "bad-request",
            ProblemKind::NotFound => "not-found",
            ProblemKind::MethodNotAllowed => "method-not-allowed",
            ProblemKind::UnsupportedMediaType => "unsupported-media-type",
            ProblemKind::BodyInvalid => "body-invalid",
        }
    }

    /// The HTTP status code.
    pub fn status(self) -> u16 {
        match self {
            ProblemKind::KeyMissing
            | ProblemKind::KeyMalformed
            | ProblemKind::BodyUnreadable
            | ProblemKind::BadRequest => 400,
            ProblemKind::NotFound => 404,
            ProblemKind::MethodNotAllowed => 405,
            ProblemKind::UnsupportedMediaType => 415,
            ProblemKind::InFlight | ProblemKind::LeaseLost => 409,
            ProblemKind::KeyReused | ProblemKind::BodyInvalid => 422,
            ProblemKind::KeyExpired => 412,
            ProblemKind::RequestTooLarge => 413,
            ProblemKind::StoreUnavailable
            | ProblemKind::Overloaded
            | ProblemKind::CommitUncertain
            | ProblemKind::RecordFormatNewer => 503,
            ProblemKind::ReplayUnreadable
            | ProblemKind::HandlerFailed
            | ProblemKind::ResponseNotRecorded => 500,
        }
    }

    /// The short human-readable summary.
    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::KeyMissing => "Idempotency-Key header is missing",
            ProblemKind::KeyMalformed => "Idempotency key is malformed",
            ProblemKind::InFlight => "A request with this Idempotency-Key is being processed",
            ProblemKind::KeyReused => "Idempotency-Key was already used for a different request",
            ProblemKind::KeyExpired => "Idempotency-Key's recorded response has expired",
            ProblemKind::RequestTooLarge => "Request body is too large",
            ProblemKind::BodyUnreadable => "Request body could not be read",
            ProblemKind::StoreUnavailable => "Idempotency store is unavailable",
            ProblemKind::Overloaded => "Server is at its limit of requests in flight",
            ProblemKind::LeaseLost => "Request's claim was lost before its response was recorded",
            ProblemKind::CommitUncertain => "Request's transaction may not have committed",
            ProblemKind::ReplayUnreadable => "Recorded response could not be read",
            ProblemKind::RecordFormatNewer => "Record was written by a newer version",
            ProblemKind::HandlerFailed => "Request failed while it was processed",
            ProblemKind::ResponseNotRecorded => {
                "Request was processed but its response could not be recorded"
            }
            ProblemKind::BadRequest => "Request is malformed",
            ProblemKind::NotFound => "No such resource",
            ProblemKind::MethodNotAllowed => "Method not allowed here",
            ProblemKind::UnsupportedMediaType => "Content type is not supported here",
            ProblemKind::BodyInvalid => "Request body is not valid for this endpoint",
        }
    }

    /// The full `type` URI.
    pub fn type_uri(self) -> String {
        format!("{PROBLEM_TYPE_PREFIX}{}", self.slug())
    }
}

/// The `application/problem+json` body of a problem of `kind`: `type`,
/// `title`, `status` and a `detail` that says what to do.
pub fn problem_body(kind: ProblemKind, detail: &str) -> String {
    serde_json::json!({
        "type": kind.type_uri(),
        "title": kind.title(),
        "status": kind.status(),
        "detail": detail,
    })
    .to_string()
}
