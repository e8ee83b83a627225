//! `Settings`: what the layer, the extractor and the attribute's handlers
//! read and record, and `RecordPolicy`.

pub use idem_http::RecordPolicy;

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
