//! actix-web's bodies as `http_body::Body` and back, so that idem-http's one
//! bounded read and one response buffer serve actix-web too.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::Payload;
use actix_web::http::header::{HeaderValue, CONTENT_LENGTH};
use actix_web::HttpRequest;
use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body::{Body, Frame};
use http_body_util::StreamBody;
use idem_http::adapter::BoxError;
use idem_http::Problem;

/// Reads the request body whole, refusing it past `limit` bytes: at once if
/// its `Content-Length` says so, else as it streams.
pub(crate) async fn read_body(
    req: &HttpRequest,
    payload: Payload,
    limit: usize,
) -> Result<Bytes, Problem> {
    let length = req.headers().get(CONTENT_LENGTH).map(HeaderValue::as_bytes);
    idem_http::adapter::read_request_body(length, payload_body(payload), limit).await
}

/// A request's payload, read as an `http_body::Body`.
pub(crate) fn payload_body(
    payload: Payload,
) -> impl Body<Data = Bytes, Error = actix_web::error::PayloadError> {
    StreamBody::new(payload.map(|chunk| chunk.map(Frame::data)))
}

/// An actix-web response body, read as an `http_body::Body`.
pub(crate) struct FromActix(pub(crate) Pin<Box<BoxBody>>);

impl Body for FromActix {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // actix-web's body errors are not `Send`: what they say is kept.
        self.0
            .as_mut()
            .poll_next(cx)
            .map(|chunk| chunk.map(|c| c.map(Frame::data).map_err(|e| e.to_string().into())))
    }
}

/// An `http_body::Body` served by actix-web (its data frames; trailers
/// have no place in an HTTP/1.1 actix-web response and are left out).
pub(crate) struct ToActix<B>(pub(crate) Pin<Box<B>>);

impl<B> MessageBody for ToActix<B>
where
    B: Body<Data = Bytes, Error = BoxError>,
{
    type Error = std::io::Error;

    fn size(&self) -> BodySize {
        BodySize::Stream
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, std::io::Error>>> {
        loop {
            let frame = match self.0.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Some(Err(std::io::Error::other(e))))
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            };
            // Trailers are skipped.
            if let Ok(data) = frame.into_data() {
                return Poll::Ready(Some(Ok(data)));
            }
        }
    }
}
