//! `Settings`: the bounds and the record policy an adapter applies to the
//! requests it covers.

use crate::record_policy::RecordPolicy;

/// What an adapter reads and records for a covered request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// The largest request body accepted, in bytes (default 1 MiB); a larger
    /// one gets 413 before anything runs.
    pub max_request_body: usize,
    /// The largest response body recorded, in bytes (default 1 MiB); a
    /// larger one is served, and retries get `response-not-recorded`.
    pub max_response_body: usize,
    /// Which answers are recorded (default: all but 5xx).
    pub record: RecordPolicy,
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
