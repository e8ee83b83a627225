//! A covered HTTP request read into a `Call`, for every HTTP adapter: what
//! its key header says to do, then its body (bounded) and its fingerprint.

use bytes::Bytes;
use http_body::Body;
use idem_core::{Call, IdempotencyKey, Scope};

use crate::body::{read_request_body, BoxError};
use crate::fingerprint::{add_body, request_fingerprint};
use crate::headers::{is_json, key_from_values};
use crate::problem::Problem;

/// What a covered request's key header says to do.
#[derive(Debug)]
pub enum KeyDecision {
    /// Run it under this key.
    Key(IdempotencyKey),
    /// No key, and keys are optional here: pass it through unprotected.
    PassThrough,
    /// Refuse it before anything runs: no key where one is required, or a
    /// malformed one.
    Refuse(Problem),
}

/// Reads the key from the values of the `header` header, in the order
/// received: the decision for a covered request.
pub fn key_decision<'a>(
    header: &str,
    required: bool,
    values: impl IntoIterator<Item = &'a [u8]>,
) -> KeyDecision {
    decide_key(values, required, || Problem::key_missing_from(header))
}

/// The decision for a covered request from its key's `values`; `missing`
/// is the problem for no key where one is `required`.
pub(crate) fn decide_key<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    required: bool,
    missing: impl FnOnce() -> Problem,
) -> KeyDecision {
    match key_from_values(values) {
        Ok(Some(key)) => KeyDecision::Key(key),
        Ok(None) if required => KeyDecision::Refuse(missing()),
        Ok(None) => KeyDecision::PassThrough,
        Err(e) => KeyDecision::Refuse(Problem::key_malformed(&e)),
    }
}

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
/// route, path, sorted query and body (parsed if JSON). Returns the call and
/// the body, for the handler.
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
) -> Result<(Call, Bytes), Problem>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let bytes = read_request_body(line.content_length, body, limit).await?;
    let mut fp = request_fingerprint("http", line.method, line.route, line.path, line.query);
    add_body(&mut fp, "body", is_json(line.content_type), &bytes);
    let call = Call::new(scope, key, fp.finish()).with_operation("http");
    Ok((call, bytes))
}
