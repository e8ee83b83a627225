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

/// The codes never recorded, whatever the policy: what the transport
/// answers for a call it cannot hand to the method (`UNIMPLEMENTED` for a
/// `grpc-encoding` the server does not accept, or a method it does not
/// serve). Nothing ran, so the claim is released, and a client that falls
/// back to another encoding with the same key gets its call run, not this
/// answer replayed for the record's lifetime.
pub const NEVER_RECORDED: [Code; 1] = [Code::Unimplemented];

/// Which final statuses of a covered method are recorded and replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordCodes {
    /// Record every status but [`TRANSIENT_CODES`], which release the claim
    /// so that a retry runs the method again (the default). `OK`,
    /// `INVALID_ARGUMENT`, `NOT_FOUND`, `ALREADY_EXISTS`,
    /// `PERMISSION_DENIED`, `FAILED_PRECONDITION`, `ABORTED`, `OUT_OF_RANGE`
    /// and `UNAUTHENTICATED` are recorded ([`NEVER_RECORDED`] never is).
    #[default]
    ExceptTransient,
    /// Record every status, the transient ones included, but
    /// [`NEVER_RECORDED`].
    All,
}

impl RecordCodes {
    /// Whether a call that ended with `code` is recorded.
    pub fn records(self, code: Code) -> bool {
        if NEVER_RECORDED.contains(&code) {
            return false;
        }
        match self {
            RecordCodes::All => true,
            RecordCodes::ExceptTransient => !TRANSIENT_CODES.contains(&code),
        }
    }
}
