//! Recorded responses for actix-web: the body read for recording (bounded),
//! and a recorded response read back, byte for byte.

use std::pin::Pin;

use actix_web::body::{BodyStream, BoxBody, MessageBody};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use idem_core::Outcome;
use idem_http::Unreadable;

/// A response whose body was read for recording.
pub(crate) enum Buffered {
    /// The whole body fit within the limit: the response and its record.
    Whole(HttpResponse, Outcome),
    /// The body is larger than the limit (or failed midway): the response is
    /// served as it streams, and not recorded.
    NotRecordable(HttpResponse),
}

type BoxError = Box<dyn std::error::Error>;

/// Reads the response body up to `limit` bytes. Over the limit, the bytes
/// read so far and the rest of the body are streamed to the client
/// unchanged.
pub(crate) async fn buffer(response: HttpResponse, limit: usize) -> Buffered {
    let (response, body) = response.into_parts();
    let mut body: Pin<Box<BoxBody>> = Box::pin(body);
    let mut buf = BytesMut::new();
    loop {
        match std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await {
            None => break,
            Some(Ok(chunk)) => {
                buf.extend_from_slice(&chunk);
                if buf.len() > limit {
                    let rest = futures_util::stream::poll_fn(move |cx| body.as_mut().poll_next(cx));
                    let head = futures_util::stream::once(std::future::ready(
                        Ok::<Bytes, BoxError>(buf.freeze()),
                    ));
                    let stream = BodyStream::new(head.chain(rest));
                    return Buffered::NotRecordable(response.set_body(BoxBody::new(stream)));
                }
            }
            Some(Err(e)) => {
                tracing::warn!(target: "idem", error = %e, "response body failed; the response is not recorded");
                let stream = futures_util::stream::iter([Ok(buf.freeze()), Err(e)]);
                return Buffered::NotRecordable(
                    response.set_body(BoxBody::new(BodyStream::new(stream))),
                );
            }
        }
    }
    let bytes = buf.freeze();
    let pairs: Vec<(&str, &[u8])> = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    let outcome = idem_http::encode(response.status().as_u16(), &pairs, &bytes);
    Buffered::Whole(response.set_body(BoxBody::new(bytes)), outcome)
}

/// Reads a recorded response back.
pub(crate) fn decode(outcome: &Outcome) -> Result<HttpResponse, Unreadable> {
    let recorded = idem_http::decode(outcome)?;
    let status = StatusCode::from_u16(recorded.status).map_err(|_| Unreadable("status"))?;
    let mut response = HttpResponse::with_body(status, BoxBody::new(recorded.body));
    let headers = response.headers_mut();
    for (name, value) in recorded.headers {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| Unreadable("header name"))?;
        let value = HeaderValue::from_bytes(&value).map_err(|_| Unreadable("header value"))?;
        headers.append(name, value);
    }
    Ok(response)
}
