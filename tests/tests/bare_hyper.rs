//! The HTTP semantics table (`http_semantics`) through a framework idem has
//! no adapter for: hyper's bare `service_fn`. What it takes to cover one is
//! what this file writes: a `Framework` for its answers (one impl), and a
//! service that reads the key, the scope and the body with idem-http's
//! rules and answers through idem-http's pipeline.

mod http_semantics;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::response::Parts;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use http_semantics::{echo_body, echo_headers, Runs, SLOW};
use hyper::body::Incoming;
use idem_axum::RecordPolicy;
use idem_core::{Engine, IgnoredFields, Scope};
use idem_http::{
    key_decision, read_call, AnswerBody, BoxError, Framework, KeyDecision, Problem,
    RecordedResponse, RequestLine, Settings, Unreadable,
};

/// An answer: a response with any body.
type Answer = Response<BoxBody<Bytes, BoxError>>;

/// A body of `data`.
fn whole(data: Bytes) -> BoxBody<Bytes, BoxError> {
    Full::new(data).map_err(|never| match never {}).boxed()
}

/// The one impl: this server's answers, as the pipeline handles them.
#[derive(Clone, Copy)]
struct Bare(Settings);

impl Framework for Bare {
    type Answer = Answer;
    type Head = Parts;
    type Body = BoxBody<Bytes, BoxError>;

    fn settings(&self) -> Settings {
        self.0
    }

    fn split(&self, answer: Answer) -> Result<(Parts, Self::Body), Answer> {
        Ok(answer.into_parts())
    }

    fn status(&self, head: &Parts) -> u16 {
        head.status.as_u16()
    }

    fn headers<'h>(&self, head: &'h Parts) -> Vec<(&'h str, &'h [u8])> {
        idem_http::fields(&head.headers)
    }

    fn join(&self, head: Parts, body: AnswerBody<Self::Body>) -> Answer {
        let body = match body {
            AnswerBody::Unread(body) => body,
            AnswerBody::Whole { data, .. } => whole(data),
            AnswerBody::Unrecordable(rest) => rest.boxed(),
        };
        Response::from_parts(head, body)
    }

    fn replay(&self, recorded: RecordedResponse) -> Result<Answer, Unreadable> {
        let mut response = Response::new(whole(recorded.body));
        *response.status_mut() =
            StatusCode::from_u16(recorded.status).map_err(|_| Unreadable("status"))?;
        for (name, value) in recorded.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| Unreadable("name"))?;
            let value = HeaderValue::from_maybe_shared(value).map_err(|_| Unreadable("value"))?;
            response.headers_mut().append(name, value);
        }
        Ok(response)
    }

    fn problem(&self, problem: &Problem) -> Answer {
        let mut response = Response::new(whole(Bytes::from(problem.body())));
        *response.status_mut() = StatusCode::from_u16(problem.status()).unwrap_or_default();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = problem.retry_after_secs() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }

    fn nobody(&self) -> Answer {
        Response::default()
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
    let bare = Bare(settings);
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
        KeyDecision::Refuse(problem) => return bare.problem(&problem),
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
        Err(problem) => return bare.problem(&problem),
    };
    let method = parts.method;
    let handler = move |_claim| async move { route(runs, method, &path, bytes).await };
    idem_http::respond(bare, engine, call, handler).await
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
