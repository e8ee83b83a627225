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
}

impl RecordPolicy {
    /// Whether an answer with `status` is recorded.
    pub fn records(self, status: u16) -> bool {
        match self {
            RecordPolicy::All => true,
            RecordPolicy::ExceptServerErrors => !(500..600).contains(&status),
        }
    }
}
