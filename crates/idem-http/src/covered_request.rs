//! A covered HTTP request read into a `Call`, for every HTTP adapter: its
//! body (bounded) and its fingerprint.

use bytes::Bytes;
use http_body::Body;
use idem_core::{Call, IdempotencyKey, IgnoredFields, Scope};

use crate::body::{read_request_body, BoxError};
use crate::fingerprint::{add_body, request_fingerprint};
use crate::headers::is_json;
use crate::problem::Problem;

/// The request line and body headers of a covered HTTP request, as the
/// fingerprint reads them.
#[derive(Clone, Copy, Debug)]
pub struct RequestLine<'a> {
    /// The method.
    pub method: &'a str,
    /// The route pattern that matched (`/accounts/{id}/debits`), if known.
    pub route: Option<&'a str>,
    /// The path.
    pub path: &'a str,
    /// The query, without `?`.
    pub query: Option<&'a str>,
    /// The `Content-Type` header, if sent and text.
    pub content_type: Option<&'a str>,
    /// The `Content-Length` header's value, if sent.
    pub content_length: Option<&'a [u8]>,
}

/// Reads a covered request's body (at most `limit` bytes: 413 past it) and
/// makes its [`Call`] under `scope` and `key`: the fingerprint of method,
/// route, path, sorted query and body (parsed if JSON, without the fields
/// `ignored` names).
/// Returns the call and the body, for the handler.
///
/// # Errors
///
/// The problem to answer with, before anything runs.
pub async fn read_call<B>(
    line: RequestLine<'_>,
    scope: Scope,
    key: IdempotencyKey,
    body: B,
    limit: usize,
    ignored: &IgnoredFields,
) -> Result<(Call, Bytes), Problem>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let bytes = read_request_body(line.content_length, body, limit).await?;
    let mut fp = request_fingerprint("http", line.method, line.route, line.path, line.query);
    add_body(&mut fp, "body", is_json(line.content_type), &bytes, ignored);
    let call = Call::new(scope, key, fp).with_operation("http");
    Ok((call, bytes))
}
