//! Recorded gRPC responses: headers, the message frames as sent, and the
//! trailers with the final status, read for recording (bounded) and read
//! back byte for byte.

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use http_body::Frame;
use http_body_util::{BodyExt as _, StreamBody};
use idem_core::Outcome;
use idem_http::Unreadable;
use tonic::body::Body;
use tonic::Code;

/// A response whose body was read for recording.
pub(crate) enum Buffered {
    /// The whole body fit within the limit: the response (to serve), its
    /// final code and its record.
    Whole(Response<Body>, Code, Outcome),
    /// The body is larger than the limit (or failed midway): the response is
    /// served as it streams, and not recorded.
    NotRecordable(Response<Body>),
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reads the response body and its trailers, up to `limit` bytes of
/// frames. Over the limit, what was read and the rest are streamed on.
pub(crate) async fn buffer<B>(response: Response<B>, limit: usize) -> Buffered
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    let mut body = Box::pin(body);
    let mut data = BytesMut::new();
    let mut trailers: Option<HeaderMap> = None;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        match frame {
            Ok(frame) => match frame.into_data() {
                Ok(chunk) => {
                    data.extend_from_slice(&chunk);
                    if data.len() > limit {
                        let head = futures_util::stream::once(std::future::ready(
                            Ok::<_, BoxError>(Frame::data(data.freeze())),
                        ));
                        let rest = http_body_util::BodyStream::new(body.map_err(Into::into));
                        let stream = head.chain(rest);
                        return Buffered::NotRecordable(Response::from_parts(
                            parts,
                            Body::new(StreamBody::new(stream)),
                        ));
                    }
                }
                Err(frame) => {
                    if let Ok(map) = frame.into_trailers() {
                        trailers.get_or_insert_with(HeaderMap::new).extend(map);
                    }
                }
            },
            Err(e) => {
                let e: BoxError = e.into();
                tracing::warn!(target: "idem", error = %e, "response body failed; the response is not recorded");
                let stream = futures_util::stream::iter([Ok(Frame::data(data.freeze())), Err(e)]);
                return Buffered::NotRecordable(Response::from_parts(
                    parts,
                    Body::new(StreamBody::new(stream)),
                ));
            }
        }
    }
    let data = data.freeze();
    // The final status is in the trailers, or in the headers of a
    // trailers-only response; a response with neither failed.
    let code = trailers
        .as_ref()
        .and_then(grpc_status)
        .or_else(|| grpc_status(&parts.headers))
        .unwrap_or(Code::Unknown);
    let outcome = idem_http::encode_with_trailers(
        parts.status.as_u16(),
        &fields(&parts.headers),
        &data,
        &trailers.as_ref().map(fields).unwrap_or_default(),
    );
    let response = Response::from_parts(parts, body_of(data, trailers));
    Buffered::Whole(response, code, outcome)
}

fn grpc_status(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from(value.parse::<i32>().ok()?))
}

fn fields(headers: &HeaderMap) -> Vec<(&str, &[u8])> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect()
}

/// A body of `data` followed by `trailers`. Without either (a
/// trailers-only response: the status is in the headers) it is empty and
/// says so, so that the server ends the stream with the HEADERS frame, as
/// gRPC over HTTP/2 requires; a body that only finds out it is empty when
/// polled makes the server send an empty DATA frame to end the stream,
/// which spec-following clients read as a broken response.
fn body_of(data: Bytes, trailers: Option<HeaderMap>) -> Body {
    if data.is_empty() && trailers.is_none() {
        return Body::empty();
    }
    let frames = [
        (!data.is_empty()).then(|| Frame::data(data)),
        trailers.map(Frame::trailers),
    ];
    let stream = futures_util::stream::iter(frames.into_iter().flatten().map(Ok::<_, BoxError>));
    Body::new(StreamBody::new(stream))
}

/// Reads a recorded response back.
pub(crate) fn decode(outcome: &Outcome) -> Result<Response<Body>, Unreadable> {
    let recorded = idem_http::decode(outcome)?;
    let status = http::StatusCode::from_u16(recorded.status).map_err(|_| Unreadable("status"))?;
    let headers = header_map(recorded.headers)?;
    let trailers = if recorded.trailers.is_empty() {
        None
    } else {
        Some(header_map(recorded.trailers)?)
    };
    let mut response = Response::new(body_of(recorded.body.into(), trailers));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

fn header_map(fields: Vec<(String, Vec<u8>)>) -> Result<HeaderMap, Unreadable> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for (name, value) in fields {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| Unreadable("header name"))?;
        let value = HeaderValue::from_bytes(&value).map_err(|_| Unreadable("header value"))?;
        map.append(name, value);
    }
    Ok(map)
}
