//! `google.rpc.RetryInfo` in a gRPC status's details: the messages of
//! `google/rpc/status.proto` and `google/rpc/error_details.proto` that idem
//! sends, declared with prost so that no generated-types crate is needed.
//! Both halves read it (the server's layer writes it, the caller's layer
//! reads it), so it lives here, where neither takes the other's
//! dependencies (feature `grpc`).

use std::time::Duration;

use prost::Message as _;

/// `google.rpc.Status`: what `grpc-status-details-bin` carries.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// `google.rpc.RetryInfo`.
#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<ProtoDuration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
struct ProtoDuration {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// The status details (an encoded `google.rpc.Status`) for gRPC code
/// `code` and `message`, carrying a `google.rpc.RetryInfo` of `delay`.
pub fn retry_info_details(code: i32, message: &str, delay: Duration) -> Vec<u8> {
    let retry = RetryInfo {
        retry_delay: Some(ProtoDuration {
            seconds: i64::try_from(delay.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(delay.subsec_nanos()).unwrap_or(0),
        }),
    };
    RpcStatus {
        code,
        message: message.to_owned(),
        details: vec![Any {
            type_url: RETRY_INFO_TYPE.to_owned(),
            value: retry.encode_to_vec(),
        }],
    }
    .encode_to_vec()
}

/// The retry delay in a status's details (an encoded `google.rpc.Status`)
/// that carry a `google.rpc.RetryInfo`, from idem or any other server;
/// nothing if they carry none or do not decode.
pub fn retry_delay_in_details(details: &[u8]) -> Option<Duration> {
    let rpc = RpcStatus::decode(details).ok()?;
    let info = rpc.details.iter().find(|d| d.type_url == RETRY_INFO_TYPE)?;
    let delay = RetryInfo::decode(info.value.as_slice()).ok()?.retry_delay?;
    Some(Duration::new(
        u64::try_from(delay.seconds).ok()?,
        u32::try_from(delay.nanos).ok()?,
    ))
}
