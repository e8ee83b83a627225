//! The statuses idem answers with on its own: each problem kind's gRPC
//! code, its detail as the message, its slug in `idem-problem` metadata, and
//! a `google.rpc.RetryInfo` where retrying makes sense.

use std::time::Duration;

use idem_http::{Problem, ProblemKind};
use tonic::body::Body;
use tonic::{Code, Status};

/// The metadata naming the rule of idem behind a status it answered with:
/// the same slug as the HTTP adapters' problem `type`
/// (`urn:idem:problem:<slug>`), such as `request-in-flight`.
pub const IDEM_PROBLEM: &str = "idem-problem";

/// The metadata gRPC's retry policies read for how long to wait before the
/// next attempt (gRFC A6), sent beside `google.rpc.RetryInfo`.
pub const RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// The gRPC code for a problem kind.
pub fn code(kind: ProblemKind) -> Code {
    match kind {
        ProblemKind::InFlight | ProblemKind::LeaseLost => Code::Aborted,
        ProblemKind::KeyReused | ProblemKind::KeyExpired => Code::FailedPrecondition,
        ProblemKind::RequestTooLarge => Code::ResourceExhausted,
        ProblemKind::StoreUnavailable
        | ProblemKind::Overloaded
        | ProblemKind::CommitUncertain
        | ProblemKind::RecordFormatNewer => Code::Unavailable,
        ProblemKind::ReplayUnreadable
        | ProblemKind::HandlerFailed
        | ProblemKind::ResponseNotRecorded => Code::Internal,
        ProblemKind::NotFound => Code::NotFound,
        ProblemKind::MethodNotAllowed => Code::Unimplemented,
        // Missing and malformed keys, unreadable or malformed requests.
        _ => Code::InvalidArgument,
    }
}

/// The status for `problem`.
pub(crate) fn status(problem: &Problem) -> Status {
    let code = code(problem.kind());
    let mut status = match problem.retry_after_secs() {
        Some(secs) => Status::with_details(
            code,
            problem.detail(),
            idem_http::adapter::retry_info_details(
                code as i32,
                problem.detail(),
                Duration::from_secs(secs),
            )
            .into(),
        ),
        None => Status::new(code, problem.detail()),
    };
    if let Ok(slug) = problem.kind().slug().parse() {
        status.metadata_mut().insert(IDEM_PROBLEM, slug);
    }
    if let Some(secs) = problem.retry_after_secs() {
        status.metadata_mut().insert("retry-after", secs.into());
        // gRFC A6: the pushback gRPC's own retry policies honour.
        status
            .metadata_mut()
            .insert(RETRY_PUSHBACK_MS, secs.saturating_mul(1000).into());
    }
    status
}

/// The trailers-only response for `problem`, its metadata included.
pub(crate) fn response(problem: &Problem) -> http::Response<Body> {
    let mut response = status(problem).into_http::<Body>();
    // What `problem_format` finds to render the answer another way.
    response.extensions_mut().insert(problem.clone());
    response
}
