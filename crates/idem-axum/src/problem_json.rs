//! Every error answer as `application/problem+json`, including the ones
//! that axum's extractors and router write as plain text or with no body.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use http_body_util::BodyExt as _;

use crate::problem::{Problem, ProblemKind};

/// The most of a plain-text error body kept as the problem's `detail`.
const MAX_DETAIL: usize = 1024;

/// Turns an error answer (4xx or 5xx) that is not already
/// `application/problem+json` into one, so that clients can tell every error
/// apart by its `type`: a body that does not parse (`bad-request`, 400), has
/// the wrong content type (`unsupported-media-type`, 415) or the wrong shape
/// (`body-invalid`, 422), a body over the limit (`request-too-large`, 413), no
/// such route (`not-found`, 404) or method (`method-not-allowed`, 405); other
/// statuses get RFC 9457's `about:blank`. A plain-text body (axum's rejection
/// message) becomes the `detail`; other headers (`Allow`, `Retry-After`) stay.
/// A body of any other content type (the application's own JSON error, say)
/// is the application's, and is kept as it is.
///
/// Use it with `axum::middleware::map_response` on the whole router:
///
/// ```no_run
/// use axum::{extract::DefaultBodyLimit, middleware::map_response, routing::post, Router};
///
/// let app: Router = Router::new()
///     .route("/orders", post(|| async { "created" }))
///     .layer(DefaultBodyLimit::max(1 << 20))
///     .layer(map_response(idem_axum::problem_json));
/// ```
pub async fn problem_json(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_problem(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let plain = content_type.is_some_and(|v| v.starts_with("text/plain"));
    if content_type.is_some() && !plain {
        // A body the application wrote in a format of its own (its JSON
        // error, say): its to keep.
        return Response::from_parts(parts, body);
    }
    let text = if plain {
        match http_body_util::Limited::new(body, MAX_DETAIL)
            .collect()
            .await
        {
            Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
            Err(_) => String::new(),
        }
    } else {
        String::new()
    };
    let kind = match status {
        StatusCode::BAD_REQUEST => Some(ProblemKind::BadRequest),
        StatusCode::NOT_FOUND => Some(ProblemKind::NotFound),
        StatusCode::METHOD_NOT_ALLOWED => Some(ProblemKind::MethodNotAllowed),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Some(ProblemKind::UnsupportedMediaType),
        StatusCode::UNPROCESSABLE_ENTITY => Some(ProblemKind::BodyInvalid),
        StatusCode::PAYLOAD_TOO_LARGE => Some(ProblemKind::RequestTooLarge),
        _ => None,
    };
    let body = match kind {
        Some(kind) => {
            let detail = if text.trim().is_empty() {
                default_detail(kind).to_owned()
            } else {
                text
            };
            Problem::new(kind, detail).body()
        }
        None => serde_json::json!({
            "type": "about:blank",
            "title": status.canonical_reason().unwrap_or("Error"),
            "status": status.as_u16(),
            "detail": if text.trim().is_empty() { status.to_string() } else { text },
        })
        .to_string(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    Response::from_parts(parts, Body::from(body)).into_response()
}

fn is_problem(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"))
}

fn default_detail(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::NotFound => "there is no resource at this path",
        ProblemKind::MethodNotAllowed => {
            "this path does not take this method; the Allow header lists the ones it takes"
        }
        ProblemKind::UnsupportedMediaType => {
            "send the body with the content type this endpoint takes (application/json)"
        }
        ProblemKind::RequestTooLarge => "the request body is larger than this endpoint accepts",
        ProblemKind::BodyInvalid => {
            "the request body does not have the fields and values this endpoint expects"
        }
        _ => "the request is malformed",
    }
}
