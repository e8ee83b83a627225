//! The HTTP semantics table (`http_semantics`) through a framework idem has
//! no adapter for: hyper's bare `service_fn`. What it takes to cover one is
//! what this file writes: its body type and how a body is made (an
//! `HttpFramework`: two one-line functions), and a service that reads the
//! key, the scope and the body with idem-http's rules and answers through
//! idem-http's pipeline.

mod http_semantics;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use http_semantics::{echo_body, echo_headers, Runs, SLOW};
use hyper::body::Incoming;
use idem_axum::RecordPolicy;
use idem_core::{Engine, IgnoredFields, Scope};
use idem_http::adapter::{
    key_decision, read_call, BoxError, HttpAnswers, HttpFramework, KeyDecision, RequestLine,
    UnrecordableBody,
};
use idem_http::Settings;

/// An answer: a response with any body.
type Answer = Response<BoxBody<Bytes, BoxError>>;

/// A body of `data`.
fn whole(data: Bytes) -> BoxBody<Bytes, BoxError> {
    Full::new(data).map_err(|never| match never {}).boxed()
}

/// What this server's answers take: their body type, and how a body is
/// made. The pipeline's answers are then [`HttpAnswers<Bare>`].
enum Bare {}

impl HttpFramework for Bare {
    type Body = BoxBody<Bytes, BoxError>;

    fn whole(data: Bytes) -> Self::Body {
        whole(data)
    }

    fn rest(rest: UnrecordableBody<Self::Body>) -> Self::Body {
        rest.boxed()
    }
}

/// The table's routes, unprotected.
async fn route(runs: Runs, method: Method, path: &str, body: Bytes) -> Answer {
    let status = |code: StatusCode, body: Vec<u8>| {
        let mut response = Response::new(whole(Bytes::from(body)));
        *response.status_mut() = code;
        response
    };
    match (method, path) {
        (Method::GET, "/echo") => status(StatusCode::OK, b"plain get".to_vec()),
        (Method::POST, "/echo") => {
            let n = runs.next();
            let mut response = status(StatusCode::CREATED, echo_body(&body, n));
            *response.headers_mut() = echo_headers(n);
            response
        }
        (Method::POST, "/slow") => {
            runs.next();
            tokio::time::sleep(SLOW).await;
            status(StatusCode::OK, b"slow done".to_vec())
        }
        (Method::POST, "/flaky") => {
            let n = runs.next();
            status(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("attempt {n} failed").into_bytes(),
            )
        }
        (Method::POST, "/big") => {
            runs.next();
            status(StatusCode::OK, vec![b'x'; 10_000])
        }
        _ => status(StatusCode::NOT_FOUND, Vec::new()),
    }
}

/// The service: POST and PATCH covered, the key required, the scope from
/// `x-tenant`, 1 KiB requests and 4 KiB recorded responses.
async fn serve_one(
    engine: Engine,
    runs: Runs,
    settings: Settings,
    req: Request<Incoming>,
) -> Answer {
    let bare = HttpAnswers::<Bare>::new(settings);
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    if parts.method != Method::POST && parts.method != Method::PATCH {
        let body = body
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        return route(runs, parts.method, &path, body).await;
    }
    let values = parts.headers.get_all(idem_http::IDEMPOTENCY_KEY);
    let key = match key_decision(
        idem_http::IDEMPOTENCY_KEY,
        true,
        values.iter().map(HeaderValue::as_bytes),
    ) {
        KeyDecision::Key(key) => key,
        KeyDecision::PassThrough => unreachable!("the key is required"),
        KeyDecision::Refuse(problem) => return problem.response(whole),
    };
    let scope = parts
        .headers
        .get("x-tenant")
        .and_then(|v| v.to_str().ok())
        .map_or_else(Scope::global, Scope::new);
    let headers: &HeaderMap = &parts.headers;
    let line = RequestLine {
        method: parts.method.as_str(),
        route: Some(&path),
        path: &path,
        query: parts.uri.query(),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        content_length: headers
            .get(header::CONTENT_LENGTH)
            .map(HeaderValue::as_bytes),
    };
    let sent_at = IgnoredFields::new(["/sent_at"]).expect("pointer");
    let limit = settings.max_request_body;
    let (call, bytes) = match read_call(line, scope, key, body, limit, &sent_at).await {
        Ok(read) => read,
        Err(problem) => return problem.response(whole),
    };
    let method = parts.method;
    let handler = move |_claim| async move { route(runs, method, &path, bytes).await };
    idem_http::adapter::respond(bare, engine, call, handler).await
}

fn start(
    engine: Engine,
    runs: Runs,
    record: RecordPolicy,
) -> Pin<Box<dyn Future<Output = String> + Send>> {
    Box::pin(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let mut settings = Settings::default();
        settings.max_request_body = 1024;
        settings.max_response_body = 4096;
        settings.record = record;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (engine, runs) = (engine.clone(), runs.clone());
                let service = hyper::service::service_fn(move |req| {
                    let (engine, runs) = (engine.clone(), runs.clone());
                    async move { Ok::<_, Infallible>(serve_one(engine, runs, settings, req).await) }
                });
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    // A client that hangs up ends its connection with an error.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        format!("http://{addr}")
    })
}

table!(http_semantics::Adapter {
    start,
    keeps_header_order: true,
    drops_on_fin: true,
});
