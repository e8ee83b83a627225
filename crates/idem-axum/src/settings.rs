//! `Settings`: what the layer, the extractor and the attribute's handlers
//! read and record, and `RecordPolicy`.

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
    pub(crate) fn records(self, status: http::StatusCode) -> bool {
        match self {
            RecordPolicy::All => true,
            RecordPolicy::ExceptServerErrors => !status.is_server_error(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub(crate) max_request_body: usize,
    pub(crate) max_response_body: usize,
    pub(crate) record: RecordPolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_request_body: 1 << 20,
            max_response_body: 1 << 20,
            record: RecordPolicy::ExceptServerErrors,
        }
    }
}
