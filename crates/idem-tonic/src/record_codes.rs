//! `RecordCodes`: which final statuses are recorded.

use tonic::Code;

/// The codes that release the claim under [`RecordCodes::ExceptTransient`]:
/// the ones gRPC clients and meshes retry, and the ones that say the server
/// failed (those HTTP answers with 5xx). A retry runs the method again.
pub const TRANSIENT_CODES: [Code; 7] = [
    Code::Cancelled,
    Code::Unknown,
    Code::DeadlineExceeded,
    Code::ResourceExhausted,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
];

/// Which final statuses of a covered method are recorded and replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordCodes {
    /// Record every status but [`TRANSIENT_CODES`], which release the claim
    /// so that a retry runs the method again (the default). `OK`,
    /// `INVALID_ARGUMENT`, `NOT_FOUND`, `ALREADY_EXISTS`,
    /// `PERMISSION_DENIED`, `FAILED_PRECONDITION`, `ABORTED`, `OUT_OF_RANGE`,
    /// `UNIMPLEMENTED` and `UNAUTHENTICATED` are recorded.
    #[default]
    ExceptTransient,
    /// Record every status, the transient ones included.
    All,
}

impl RecordCodes {
    /// Whether a call that ended with `code` is recorded.
    pub fn records(self, code: Code) -> bool {
        match self {
            RecordCodes::All => true,
            RecordCodes::ExceptTransient => !TRANSIENT_CODES.contains(&code),
        }
    }
}
