//! Reading a covered request's body, bounded.

use actix_web::dev::Payload;
use actix_web::http::header::CONTENT_LENGTH;
use actix_web::HttpRequest;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use idem_http::Problem;

/// Reads the request body, refusing it past `limit` bytes: at once if its
/// `Content-Length` says so, else as it streams.
pub(crate) async fn read_body(
    req: &HttpRequest,
    mut payload: Payload,
    limit: usize,
) -> Result<Bytes, Problem> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Problem::too_large(limit));
    }
    let mut buf = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Problem::body_unreadable(&e))?;
        if buf.len() + chunk.len() > limit {
            return Err(Problem::too_large(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
