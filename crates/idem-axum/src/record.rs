//! Recorded responses: a compact binary form of status, end-to-end headers
//! and body, and the buffering that produces it.

use axum::body::Body;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use idem_core::Outcome;

use crate::problem::{Problem, ProblemKind};

const MAGIC: &[u8; 4] = b"IDR1";

/// Headers that describe one connection, not the response (RFC 9110 §7.6.1),
/// and framing headers the server sets again for the replayed body.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Whether `name` is stored in a record: end-to-end headers are, hop-by-hop
/// ones (the fixed list, `Content-Length`, and any named in `Connection`) are not.
fn is_recorded(name: &HeaderName, headers: &HeaderMap) -> bool {
    if HOP_BY_HOP.contains(name) || name == header::CONTENT_LENGTH {
        return false;
    }
    !headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|token| token.trim().eq_ignore_ascii_case(name.as_str()))
        })
    })
}

/// Encodes a response the way idem-axum records it: status, end-to-end
/// headers (every value, in order) and body. A handler that completes its
/// record inside its own database transaction (`idem-postgres`) encodes the
/// response it returns with this, so that retries replay it byte for byte.
pub fn encode(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Outcome {
    let kept: Vec<(&HeaderName, &HeaderValue)> = headers
        .iter()
        .filter(|(n, _)| is_recorded(n, headers))
        .collect();
    let size = 4
        + 2
        + 4
        + kept
            .iter()
            .map(|(n, v)| 2 + n.as_str().len() + 4 + v.len())
            .sum::<usize>()
        + 8
        + body.len();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&status.as_u16().to_be_bytes());
    out.extend_from_slice(&u32::try_from(kept.len()).unwrap_or(u32::MAX).to_be_bytes());
    for (name, value) in kept {
        let name = name.as_str().as_bytes();
        // Header names are short and values are bounded by the server's
        // header limits, far below these widths.
        out.extend_from_slice(&u16::try_from(name.len()).unwrap_or(u16::MAX).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    out.extend_from_slice(body);
    Outcome::new(out)
}

/// Why a record could not be read back.
#[derive(Debug)]
pub(crate) struct Unreadable(pub(crate) &'static str);

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Unreadable> {
        if self.0.len() < n {
            return Err(Unreadable(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Unreadable> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
}

/// Decodes a recorded response.
pub(crate) fn decode(outcome: &Outcome) -> Result<Response, Unreadable> {
    let mut r = Reader(outcome.as_bytes());
    if r.take(4, "magic")? != MAGIC {
        return Err(Unreadable("not a recorded HTTP response"));
    }
    let status = StatusCode::from_u16(u16::from_be_bytes(r.array("status")?))
        .map_err(|_| Unreadable("status"))?;
    let count = u32::from_be_bytes(r.array("header count")?);
    let mut headers = HeaderMap::new();
    for _ in 0..count {
        let n = usize::from(u16::from_be_bytes(r.array("header name length")?));
        let name = HeaderName::from_bytes(r.take(n, "header name")?)
            .map_err(|_| Unreadable("header name"))?;
        let n = usize::try_from(u32::from_be_bytes(r.array("header value length")?))
            .map_err(|_| Unreadable("header value length"))?;
        let value = HeaderValue::from_bytes(r.take(n, "header value")?)
            .map_err(|_| Unreadable("header value"))?;
        headers.append(name, value);
    }
    let n = usize::try_from(u64::from_be_bytes(r.array("body length")?))
        .map_err(|_| Unreadable("body length"))?;
    let body = Bytes::copy_from_slice(r.take(n, "body")?);
    if !r.0.is_empty() {
        return Err(Unreadable("trailing bytes"));
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// A response whose body was read for recording.
pub(crate) enum Buffered {
    /// The whole body fit within the limit.
    Whole(Response, Outcome),
    /// The body is larger than the limit (or failed midway): the response is
    /// served as it streams, and not recorded.
    NotRecordable(Response),
}

/// Reads the response body up to `limit` bytes. Over the limit, the bytes read
/// so far and the rest of the body are streamed to the client unchanged.
pub(crate) async fn buffer(response: Response, limit: usize) -> Buffered {
    let (parts, mut body) = response.into_parts();
    let mut buf = BytesMut::new();
    loop {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                // Trailers are neither recorded nor replayed.
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                buf.extend_from_slice(&data);
                if buf.len() > limit {
                    return Buffered::NotRecordable(Response::from_parts(
                        parts,
                        chain(buf.freeze(), body),
                    ));
                }
            }
            Some(Err(e)) => {
                tracing::warn!(target: "idem", error = %e, "response body failed; the response is not recorded");
                let err = futures_util::stream::once(async move { Err::<Bytes, axum::Error>(e) });
                let prefix =
                    futures_util::stream::once(futures_util::future::ready(Ok(buf.freeze())));
                return Buffered::NotRecordable(Response::from_parts(
                    parts,
                    Body::from_stream(prefix.chain(err)),
                ));
            }
        }
    }
    let bytes = buf.freeze();
    let outcome = encode(parts.status, &parts.headers, &bytes);
    Buffered::Whole(Response::from_parts(parts, Body::from(bytes)), outcome)
}

fn chain(prefix: Bytes, rest: Body) -> Body {
    let head = futures_util::stream::once(futures_util::future::ready(Ok::<Bytes, axum::Error>(
        prefix,
    )));
    Body::from_stream(head.chain(rest.into_data_stream()))
}

/// What a retry gets for a response that was served but could not be recorded.
pub(crate) fn not_recorded(limit: usize) -> Outcome {
    let problem = Problem::new(
        ProblemKind::ResponseNotRecorded,
        format!(
            "the request with this Idempotency-Key was processed, but its response (larger than \
             the {limit} bytes this endpoint records, or cut off) could not be recorded; it was \
             not processed again"
        ),
    );
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    encode(problem.kind().status(), &headers, problem.body().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_every_end_to_end_header_in_order() {
        let mut h = HeaderMap::new();
        h.append(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.append(header::SET_COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::SET_COOKIE, HeaderValue::from_static("b=2"));
        h.append(header::LINK, HeaderValue::from_static("</a>; rel=next"));
        h.append(header::LINK, HeaderValue::from_static("</b>; rel=prev"));
        h.append(header::CONNECTION, HeaderValue::from_static("x-trace"));
        h.append(
            HeaderName::from_static("x-trace"),
            HeaderValue::from_static("hop"),
        );
        h.append(
            HeaderName::from_static("keep-alive"),
            HeaderValue::from_static("timeout=5"),
        );
        h.append(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        let body = [0u8, 255, 10];
        let outcome = encode(StatusCode::CREATED, &h, &body);
        let back = decode(&outcome).expect("decodes");
        assert_eq!(back.status(), StatusCode::CREATED);
        let cookies: Vec<_> = back.headers().get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        let links: Vec<_> = back.headers().get_all(header::LINK).iter().collect();
        assert_eq!(links, ["</a>; rel=next", "</b>; rel=prev"]);
        for hop in ["connection", "x-trace", "keep-alive", "content-length"] {
            assert!(
                !back.headers().contains_key(hop),
                "{hop} must not be recorded"
            );
        }
    }

    #[test]
    fn truncated_records_are_refused_not_panicked_on() {
        let outcome = encode(StatusCode::OK, &HeaderMap::new(), b"hello");
        let bytes = outcome.as_bytes();
        for cut in 0..bytes.len() {
            assert!(
                decode(&Outcome::new(bytes[..cut].to_vec())).is_err(),
                "cut at {cut}"
            );
        }
        assert!(decode(&Outcome::new(b"junk-junk-junk".to_vec())).is_err());
    }
}
