//! A gRPC method behind `idem_tonic::IdempotencyLayer` reads its layer's
//! limits through `idem_http::current_settings()`, as an HTTP handler reads
//! its route's: what it may record is what the layer records, and that its
//! answer is recorded by its gRPC status.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use idem_core::{Engine, MemoryStore};
use idem_http::{RecordPolicy, Settings};
use tonic::body::Body;
use tower::{Layer, Service, ServiceExt};

/// One gRPC message frame: uncompressed, its length, its bytes.
fn frame(message: &[u8]) -> Bytes {
    let mut framed = vec![0u8];
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    Bytes::from(framed)
}

#[tokio::test]
async fn a_grpc_method_reads_the_limits_its_layer_was_given() {
    let seen: Arc<Mutex<Option<Settings>>> = Arc::default();
    let method = {
        let seen = Arc::clone(&seen);
        tower::service_fn(move |_request: Request<Body>| {
            let seen = Arc::clone(&seen);
            async move {
                *seen.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(idem_http::current_settings());
                let mut response = Response::new(Body::new(Full::new(frame(b"ok"))));
                response
                    .headers_mut()
                    .insert("content-type", HeaderValue::from_static("application/grpc"));
                response
                    .headers_mut()
                    .insert("grpc-status", HeaderValue::from_static("0"));
                Ok::<_, std::convert::Infallible>(response)
            }
        })
    };
    let layer = idem_tonic::IdempotencyLayer::new(Engine::new(MemoryStore::new()))
        .method("/test.v1.Orders/Place")
        .max_request_body(7_000)
        .max_response_body(123_456);
    let mut service = layer.layer(method);
    let request = Request::post("/test.v1.Orders/Place")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("idempotency-key", "order-1")
        .body(Body::new(Full::new(frame(b"order"))))
        .expect("a request");
    let response = service
        .ready()
        .await
        .expect("ready")
        .call(request)
        .await
        .expect("answered");
    assert_eq!(
        response
            .headers()
            .get("grpc-status")
            .map(HeaderValue::as_bytes),
        Some(&b"0"[..]),
        "the method ran and answered OK"
    );
    let body = response.into_body().collect().await.expect("the body");
    assert_eq!(body.to_bytes(), frame(b"ok"));
    let seen = (*seen.lock().unwrap_or_else(PoisonError::into_inner)).expect("the method ran");
    assert_eq!(
        (seen.max_request_body, seen.max_response_body),
        (7_000, 123_456),
        "the method reads its layer's limits, not the defaults"
    );
    assert_eq!(
        seen.record,
        RecordPolicy::ByGrpcStatus,
        "the method reads that its answer is recorded by its gRPC status, not an HTTP policy"
    );
}
