//! Recorded responses: a compact binary form of status, end-to-end headers
//! and body, and the buffering that produces it.

use axum::body::Body;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header::HeaderName;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use idem_core::Outcome;
pub(crate) use idem_http::Unreadable;

/// Encodes a response the way idem records it (see [`idem_http::encode`]):
/// status, end-to-end headers (every value, in order) and body. A handler
/// that completes its record inside its own database transaction encodes the
/// response it returns with this (or uses `commit_response`), so that
/// retries replay it byte for byte.
pub fn encode(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Outcome {
    let pairs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    idem_http::encode(status.as_u16(), &pairs, body)
}

/// Decodes a recorded response.
pub(crate) fn decode(outcome: &Outcome) -> Result<Response, Unreadable> {
    let recorded = idem_http::decode(outcome)?;
    let status = StatusCode::from_u16(recorded.status).map_err(|_| Unreadable("status"))?;
    let mut headers = HeaderMap::with_capacity(recorded.headers.len());
    for (name, value) in recorded.headers {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| Unreadable("header name"))?;
        let value = HeaderValue::from_bytes(&value).map_err(|_| Unreadable("header value"))?;
        headers.append(name, value);
    }
    let mut response = Response::new(Body::from(recorded.body));
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

pub(crate) use idem_http::not_recorded;

#[cfg(test)]
mod tests {
    use super::*;
    use http::header;

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
}
