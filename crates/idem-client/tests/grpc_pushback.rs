//! The gRPC client layer against servers that answer as gRPC's other
//! implementations do: the status details carry a `google.rpc.RetryInfo`
//! (encoded by `tonic-types` and sent by tonic's own `Status` encoding,
//! not idem's) without `grpc-retry-pushback-ms`, or the pushback says not
//! to retry at all (gRFC A6).

#![cfg(feature = "grpc")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{Request, Response};
use idem_client::GrpcIdempotencyLayer;
use tonic::body::Body;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};
use tower::{Layer as _, ServiceExt as _};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Each attempt's arrival and idempotency key.
type Seen = Arc<Mutex<Vec<(Instant, String)>>>;

type Server = tower::util::BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// A server whose first answer is the trailers-only `first` (with the
/// header `extra`), then OK; it keeps each attempt's arrival and key.
fn server(first: tonic::Status, extra: Option<(&'static str, &'static str)>) -> (Server, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let first = Arc::new(first);
    let log = Arc::clone(&seen);
    let service = tower::service_fn(move |req: Request<Body>| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let key = req
            .headers()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        log.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((Instant::now(), key));
        let mut answer = if n == 0 {
            // tonic's own trailers-only answer of the status.
            let mut response = (*first).clone().into_http::<Body>();
            if let Some((name, value)) = extra {
                response
                    .headers_mut()
                    .insert(name, http::HeaderValue::from_static(value));
            }
            response
        } else {
            tonic::Status::ok("").into_http::<Body>()
        };
        answer.extensions_mut().clear();
        std::future::ready(Ok::<_, BoxError>(answer))
    });
    (Server::new(service), seen)
}

/// The answer's `grpc-status`.
fn code(answer: &Response<Body>) -> Option<&[u8]> {
    answer
        .headers()
        .get("grpc-status")
        .map(http::HeaderValue::as_bytes)
}

fn call() -> Request<Body> {
    Request::post("http://ledger.test/payments.v1.Ledger/Debit")
        .header("content-type", "application/grpc")
        .body(Body::empty())
        .expect("request")
}

fn unavailable_retry_in(delay: Duration) -> tonic::Status {
    tonic::Status::with_error_details(
        Code::Unavailable,
        "the ledger is busy",
        ErrorDetails::with_retry_info(Some(delay)),
    )
}

#[tokio::test]
async fn a_server_that_asks_through_retry_info_alone_is_waited_for() {
    let (service, seen) = server(unavailable_retry_in(Duration::from_millis(400)), None);
    let client = GrpcIdempotencyLayer::new().layer(service);
    let answer = client.oneshot(call()).await.expect("answered");
    assert_eq!(code(&answer), Some(&b"0"[..]));
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(seen.len(), 2, "one retry");
    assert_eq!(seen[0].1, seen[1].1, "with the same key");
    let waited = seen[1].0 - seen[0].0;
    assert!(
        waited >= Duration::from_millis(400),
        "the retry came {waited:?} after the answer asking for 400 ms"
    );
}

#[tokio::test]
async fn the_pushback_header_wins_over_retry_info() {
    let (service, seen) = server(
        unavailable_retry_in(Duration::from_secs(30)),
        Some(("grpc-retry-pushback-ms", "50")),
    );
    let client = GrpcIdempotencyLayer::new().layer(service);
    let answer = client.oneshot(call()).await.expect("answered");
    assert_eq!(code(&answer), Some(&b"0"[..]));
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(
        seen[1].0 - seen[0].0 < Duration::from_secs(5),
        "{:?}",
        seen[1].0 - seen[0].0
    );
}

#[tokio::test]
async fn a_pushback_that_says_do_not_retry_is_final() {
    for pushback in ["-1", "soon"] {
        let (service, seen) = server(
            tonic::Status::new(Code::Unavailable, "shedding load"),
            Some(("grpc-retry-pushback-ms", pushback)),
        );
        let client = GrpcIdempotencyLayer::new().layer(service);
        let answer = client.oneshot(call()).await.expect("answered");
        assert_eq!(
            code(&answer),
            Some(&b"14"[..]),
            "pushback {pushback}: the server's answer, not retried"
        );
        assert_eq!(
            seen.lock().unwrap_or_else(PoisonError::into_inner).len(),
            1,
            "pushback {pushback}"
        );
    }
}

#[tokio::test]
async fn status_details_that_are_not_valid_are_ignored_not_a_panic() {
    let (service, seen) = server(
        tonic::Status::new(Code::Unavailable, "busy"),
        Some(("grpc-status-details-bin", "%%% not base64 %%%")),
    );
    let client = GrpcIdempotencyLayer::new().layer(service);
    let answer = client.oneshot(call()).await.expect("answered");
    assert_eq!(code(&answer), Some(&b"0"[..]));
    assert_eq!(seen.lock().unwrap_or_else(PoisonError::into_inner).len(), 2);
}
