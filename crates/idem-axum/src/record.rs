//! Recorded responses in axum's types: a response encoded the way idem
//! records it ([`idem_http::encode`]).

use http::{HeaderMap, StatusCode};
use idem_core::Outcome;

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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::header::{self, HeaderName};
    use http::HeaderValue;

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
        let back = idem_http::decode(&outcome)
            .expect("decodes")
            .into_response(|body, _| Body::from(body))
            .expect("reads back");
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
