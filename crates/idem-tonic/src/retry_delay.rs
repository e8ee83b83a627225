//! `retry_delay`: how long a gRPC status says to wait before a retry.

/// The retry delay in a status's `google.rpc.RetryInfo` (from idem or any
/// other server), for clients and tests.
pub fn retry_delay(status: &tonic::Status) -> Option<std::time::Duration> {
    idem_http::adapter::retry_delay_in_details(status.details())
}
