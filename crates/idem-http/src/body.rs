//! Bodies, for every adapter: a request body read whole within a bound, and
//! a response body read for recording, which goes on streaming unchanged
//! when it cannot be recorded.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use crate::problem::Problem;

/// The error of a body whose type is not known.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reads a request body whole, refusing it past `limit` bytes: at once if
/// its `Content-Length` (the header's value, if sent) says so, else as it
/// streams. The problem is `request-too-large` or `body-unreadable`.
///
/// # Errors
///
/// The problem to answer with; the handler has not run.
pub async fn read_request_body<B>(
    content_length: Option<&[u8]>,
    body: B,
    limit: usize,
) -> Result<Bytes, Problem>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let declared = content_length
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Problem::too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(Problem::too_large(limit)),
        Err(e) => Err(Problem::body_unreadable(&e)),
    }
}

/// A response body read for recording.
#[derive(Debug)]
pub enum BufferedBody<B> {
    /// The whole body fit within the limit: its data and its trailers.
    Whole {
        /// Every data frame, in order.
        data: Bytes,
        /// The trailers, if any came.
        trailers: Option<HeaderMap>,
    },
    /// The body is larger than the limit, or failed midway: it cannot be
    /// recorded, and is served as it streams (what was read, then the rest
    /// or the error).
    Unrecordable(UnrecordableBody<B>),
}

/// Reads a response body for recording, up to `limit` bytes of data.
pub async fn buffer_body<B>(body: B, limit: usize) -> BufferedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = Box::pin(body);
    let mut data = BytesMut::new();
    let mut trailers: Option<HeaderMap> = None;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        match frame {
            Ok(frame) => match frame.into_data() {
                Ok(chunk) => {
                    data.extend_from_slice(&chunk);
                    if data.len() > limit {
                        return BufferedBody::Unrecordable(UnrecordableBody {
                            read: Some(data.freeze()),
                            rest: Rest::Body(body),
                        });
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
                return BufferedBody::Unrecordable(UnrecordableBody {
                    read: Some(data.freeze()),
                    rest: Rest::Failed(Some(e)),
                });
            }
        }
    }
    BufferedBody::Whole {
        data: data.freeze(),
        trailers,
    }
}

/// A response body that could not be recorded, served as it was: the data
/// read so far, then the rest of the body (or the error it failed with).
#[derive(Debug)]
pub struct UnrecordableBody<B> {
    read: Option<Bytes>,
    rest: Rest<B>,
}

#[derive(Debug)]
enum Rest<B> {
    Body(Pin<Box<B>>),
    Failed(Option<BoxError>),
}

impl<B> Body for UnrecordableBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // Every field is Unpin (the body is boxed).
        let this = self.get_mut();
        if let Some(read) = this.read.take() {
            if !read.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(read))));
            }
        }
        match &mut this.rest {
            Rest::Body(body) => body
                .as_mut()
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(Into::into))),
            Rest::Failed(error) => Poll::Ready(error.take().map(Err)),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.as_ref().is_none_or(Bytes::is_empty)
            && match &self.rest {
                Rest::Body(body) => body.is_end_stream(),
                Rest::Failed(error) => error.is_none(),
            }
    }

    fn size_hint(&self) -> SizeHint {
        let read = self.read.as_ref().map_or(0, Bytes::len) as u64;
        match &self.rest {
            Rest::Body(body) => {
                let rest = body.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(read));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(read));
                }
                hint
            }
            Rest::Failed(_) => SizeHint::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use std::collections::VecDeque;

    /// A body of the given data frames, one a poll.
    struct Chunks(VecDeque<&'static [u8]>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(
                self.0
                    .pop_front()
                    .map(|c| Ok(Frame::data(Bytes::from_static(c)))),
            )
        }
    }

    fn chunks(parts: &[&'static [u8]]) -> Chunks {
        Chunks(parts.iter().copied().collect())
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_served_whole_and_not_recorded() {
        let body = chunks(&[b"abc", b"def", b"ghi"]);
        let BufferedBody::Unrecordable(rest) = buffer_body(body, 4).await else {
            panic!("a 9-byte body over a 4-byte limit must not be recorded");
        };
        let served = rest.collect().await.expect("streams").to_bytes();
        assert_eq!(&served[..], b"abcdefghi");
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let BufferedBody::Whole { data, trailers } =
            buffer_body(Full::new(Bytes::from_static(b"{}")), 2).await
        else {
            panic!("a 2-byte body fits a 2-byte limit");
        };
        assert_eq!(&data[..], b"{}");
        assert!(trailers.is_none());
    }

    #[tokio::test]
    async fn a_request_body_that_says_it_is_too_large_is_refused_unread() {
        let problem = read_request_body(Some(b"10"), Full::new(Bytes::new()), 4)
            .await
            .expect_err("Content-Length over the limit");
        assert_eq!(problem.kind(), crate::ProblemKind::RequestTooLarge);
        let problem = read_request_body(None, chunks(&[b"abc", b"de"]), 4)
            .await
            .expect_err("5 bytes streamed over a 4-byte limit");
        assert_eq!(problem.kind(), crate::ProblemKind::RequestTooLarge);
        let read = read_request_body(Some(b"5"), chunks(&[b"abc", b"de"]), 5).await;
        assert_eq!(&read.expect("within the limit")[..], b"abcde");
    }
}
