//! `RecordPolicy`: which answers are recorded.

/// Which handler answers are recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordPolicy {
    /// Record every answer below 500; a 5xx answer releases the claim so that
    /// a retry runs the handler again (the default).
    #[default]
    ExceptServerErrors,
    /// Record every answer, 5xx included (Stripe's practice).
    All,
    /// A gRPC call's answer, whose HTTP status is 200 whatever happened: it
    /// is recorded by the final status in its trailers, under the layer's
    /// `idem_tonic::RecordCodes`, which idem-tonic's layer decides. What
    /// a covered gRPC method reads in
    /// [`current_settings`](crate::current_settings). By HTTP status alone
    /// it records what [`ExceptServerErrors`](Self::ExceptServerErrors)
    /// does: a 5xx is no gRPC answer.
    ByGrpcStatus,
}

impl RecordPolicy {
    /// Whether an answer with `status` is recorded.
    pub fn records(self, status: u16) -> bool {
        match self {
            RecordPolicy::All => true,
            RecordPolicy::ExceptServerErrors | RecordPolicy::ByGrpcStatus => {
                !(500..600).contains(&status)
            }
        }
    }
}
