//! The HTTP semantics table, row by row, through `IdempotencyLayer` on a real
//! socket with a real HTTP client.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use idem_axum::{IdempotencyLayer, RecordPolicy};
use idem_core::{Engine, MemoryStore, Scope};
use idem_tests::{serve, DownStore};

#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

impl Runs {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

async fn echo(State(runs): State<Runs>, body: Bytes) -> Response {
    let n = runs.0.fetch_add(1, Ordering::SeqCst) + 1;
    let mut headers = HeaderMap::new();
    headers.append(
        header::SET_COOKIE,
        HeaderValue::from_static("session=abc; Path=/"),
    );
    headers.append(
        header::SET_COOKIE,
        HeaderValue::from_static("theme=dark; Path=/"),
    );
    headers.append(header::LINK, HeaderValue::from_static("</a>; rel=\"next\""));
    headers.append(header::LINK, HeaderValue::from_static("</b>; rel=\"prev\""));
    headers.insert(header::LOCATION, HeaderValue::from_static("/things/1"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert("x-run", HeaderValue::from(n));
    let mut body = body.to_vec();
    body.extend_from_slice(format!("|run={n}|").as_bytes());
    body.extend_from_slice(&[0, 159, 255]);
    (StatusCode::CREATED, headers, body).into_response()
}

async fn slow(State(runs): State<Runs>) -> Response {
    runs.0.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    (StatusCode::OK, "slow done").into_response()
}

async fn flaky(State(runs): State<Runs>) -> Response {
    let n = runs.0.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("attempt {n} failed"),
    )
        .into_response()
}

async fn big(State(runs): State<Runs>) -> Response {
    runs.0.fetch_add(1, Ordering::SeqCst);
    vec![b'x'; 10_000].into_response()
}

fn router(engine: Engine, runs: &Runs, record: RecordPolicy) -> Router {
    Router::new()
        .route("/echo", post(echo).get(|| async { "plain get" }))
        .route("/slow", post(slow))
        .route("/flaky", post(flaky))
        .route("/big", post(big))
        .with_state(runs.clone())
        .layer(
            IdempotencyLayer::new(engine)
                .max_request_body(1024)
                .max_response_body(4096)
                .record(record)
                .scope(|parts| {
                    Ok(parts
                        .headers
                        .get("x-tenant")
                        .and_then(|v| v.to_str().ok())
                        .map_or_else(Scope::global, Scope::new))
                }),
        )
}

async fn start(record: RecordPolicy) -> (String, Runs) {
    let runs = Runs::default();
    let url = serve(router(Engine::new(MemoryStore::new()), &runs, record)).await;
    (url, runs)
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post_json(url: &str, key: Option<&[u8]>, body: &str) -> reqwest::Response {
    let mut req = client()
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        req = req.header(
            "idempotency-key",
            HeaderValue::from_bytes(key).expect("header value"),
        );
    }
    req.send().await.expect("request")
}

/// Status, headers (without the per-connection `date`) and body.
async fn snapshot(r: reqwest::Response) -> (StatusCode, Vec<(String, Vec<u8>)>, Vec<u8>) {
    let status = r.status();
    let headers = r
        .headers()
        .iter()
        .filter(|(n, _)| *n != header::DATE)
        .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
        .collect();
    (status, headers, r.bytes().await.expect("body").to_vec())
}

async fn problem(r: reqwest::Response, status: StatusCode, type_suffix: &str) -> serde_json::Value {
    assert_eq!(r.status(), status);
    assert_eq!(
        r.headers()
            .get(header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes),
        Some(&b"application/problem+json"[..])
    );
    let body: serde_json::Value = r.json().await.expect("problem json");
    assert_eq!(body["type"], format!("urn:idem:problem:{type_suffix}"));
    assert_eq!(body["status"], status.as_u16());
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(body["detail"].as_str().is_some_and(|t| !t.is_empty()));
    body
}

#[tokio::test]
async fn missing_key_is_400_and_runs_nothing() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let r = post_json(&format!("{url}/echo"), None, "{}").await;
    let body = problem(r, StatusCode::BAD_REQUEST, "key-missing").await;
    assert!(body["detail"]
        .as_str()
        .unwrap_or("")
        .contains("Idempotency-Key"));
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn malformed_keys_are_400_and_name_the_rule() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let long = vec![b'k'; 256];
    let cases: [(&[u8], &str); 5] = [
        (b"", "empty"),
        (&long, "256"),
        (b"a b", "visible ASCII"),
        ("caf\u{e9}".as_bytes(), "visible ASCII"),
        (b"\"unterminated", "quote"),
    ];
    for (key, says) in cases {
        let r = post_json(&format!("{url}/echo"), Some(key), "{}").await;
        let body = problem(r, StatusCode::BAD_REQUEST, "key-malformed").await;
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(says),
            "detail for {key:?} should mention {says:?}: {detail}"
        );
    }
    // Sent twice is malformed too.
    let r = client()
        .post(format!("{url}/echo"))
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .send()
        .await
        .expect("request");
    problem(r, StatusCode::BAD_REQUEST, "key-malformed").await;
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn a_255_character_key_works_and_quoted_keys_are_the_same_key() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let key = "k".repeat(255);
    let first = post_json(&format!("{url}/echo"), Some(key.as_bytes()), "{}").await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let quoted = format!("\"{key}\"");
    let again = post_json(&format!("{url}/echo"), Some(quoted.as_bytes()), "{}").await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(HeaderValue::as_bytes),
        Some(&b"true"[..])
    );
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn replay_is_byte_identical_with_every_header_value() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let first =
        snapshot(post_json(&format!("{url}/echo"), Some(b"replay-1"), r#"{"a":1}"#).await).await;
    assert_eq!(first.0, StatusCode::CREATED);
    let cookies: Vec<_> = first.1.iter().filter(|(n, _)| n == "set-cookie").collect();
    assert_eq!(cookies.len(), 2, "the handler set two cookies");
    for _ in 0..3 {
        let (status, mut headers, body) =
            snapshot(post_json(&format!("{url}/echo"), Some(b"replay-1"), r#"{"a":1}"#).await)
                .await;
        let marker = headers
            .iter()
            .position(|(n, _)| n == "idempotent-replayed")
            .expect("replay marker");
        assert_eq!(headers.remove(marker).1, b"true");
        assert_eq!(status, first.0);
        assert_eq!(
            headers, first.1,
            "every header, repeated ones included, in order"
        );
        assert_eq!(body, first.2, "the body byte for byte");
    }
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn reencoded_json_replays_and_other_json_is_422_with_nothing_of_the_first_answer() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let first = post_json(
        &format!("{url}/echo"),
        Some(b"json-1"),
        r#"{"amount":1000,"currency":"EUR"}"#,
    )
    .await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let same = post_json(
        &format!("{url}/echo"),
        Some(b"json-1"),
        "{ \"currency\" : \"EUR\",\n  \"amount\" : 1000 }",
    )
    .await;
    assert_eq!(same.status(), StatusCode::CREATED);
    assert!(same.headers().contains_key("idempotent-replayed"));
    let other = post_json(
        &format!("{url}/echo"),
        Some(b"json-1"),
        r#"{"amount":9999,"currency":"EUR"}"#,
    )
    .await;
    let headers = other.headers().clone();
    let body = problem(other, StatusCode::UNPROCESSABLE_ENTITY, "key-reused").await;
    let text = body.to_string();
    assert!(
        !text.contains("run=") && !text.contains("1000"),
        "nothing of the first answer: {text}"
    );
    assert!(!headers.contains_key(header::SET_COOKIE) && !headers.contains_key(header::LOCATION));
    // The query and the path are part of the request too.
    let other_query = post_json(
        &format!("{url}/echo?x=1"),
        Some(b"json-1"),
        r#"{"amount":1000,"currency":"EUR"}"#,
    )
    .await;
    problem(other_query, StatusCode::UNPROCESSABLE_ENTITY, "key-reused").await;
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn query_parameter_order_does_not_matter() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let a = post_json(&format!("{url}/echo?a=1&b=2"), Some(b"q"), "{}").await;
    assert_eq!(a.status(), StatusCode::CREATED);
    let b = post_json(&format!("{url}/echo?b=2&a=1"), Some(b"q"), "{}").await;
    assert!(b.headers().contains_key("idempotent-replayed"));
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn duplicate_in_flight_is_409_with_retry_after() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let first = tokio::spawn({
        let url = url.clone();
        async move { post_json(&format!("{url}/slow"), Some(b"slow-1"), "{}").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let dup = post_json(&format!("{url}/slow"), Some(b"slow-1"), "{}").await;
    let retry_after: u64 = dup
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in whole seconds");
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    problem(dup, StatusCode::CONFLICT, "request-in-flight").await;
    let done = first.await.expect("first");
    assert_eq!(done.status(), StatusCode::OK);
    let replay = post_json(&format!("{url}/slow"), Some(b"slow-1"), "{}").await;
    assert!(replay.headers().contains_key("idempotent-replayed"));
    assert_eq!(replay.text().await.expect("body"), "slow done");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn store_down_is_503_with_retry_after_and_runs_nothing() {
    let runs = Runs::default();
    let url = serve(router(
        Engine::new(DownStore),
        &runs,
        RecordPolicy::default(),
    ))
    .await;
    let r = post_json(&format!("{url}/echo"), Some(b"down-1"), "{}").await;
    assert!(r.headers().contains_key(header::RETRY_AFTER));
    let body = problem(r, StatusCode::SERVICE_UNAVAILABLE, "store-unavailable").await;
    assert!(
        !body.to_string().contains("refused"),
        "internal errors stay in the logs"
    );
    assert_eq!(runs.count(), 0, "fail closed: the handler must not run");
}

#[tokio::test]
async fn server_errors_are_not_recorded_by_default() {
    let (url, runs) = start(RecordPolicy::default()).await;
    for attempt in 1..=2 {
        let r = post_json(&format!("{url}/flaky"), Some(b"flaky-1"), "{}").await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!r.headers().contains_key("idempotent-replayed"));
        assert_eq!(
            r.text().await.expect("body"),
            format!("attempt {attempt} failed")
        );
    }
    assert_eq!(runs.count(), 2, "each retry ran again");
}

#[tokio::test]
async fn record_all_policy_records_server_errors() {
    let (url, runs) = start(RecordPolicy::All).await;
    let first = post_json(&format!("{url}/flaky"), Some(b"flaky-2"), "{}").await;
    assert_eq!(first.status(), StatusCode::SERVICE_UNAVAILABLE);
    let again = post_json(&format!("{url}/flaky"), Some(b"flaky-2"), "{}").await;
    assert!(again.headers().contains_key("idempotent-replayed"));
    assert_eq!(again.text().await.expect("body"), "attempt 1 failed");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn oversized_request_is_413_before_anything_runs() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(2000));
    let r = post_json(&format!("{url}/echo"), Some(b"big-req"), &body).await;
    problem(r, StatusCode::PAYLOAD_TOO_LARGE, "request-too-large").await;
    // Without a Content-Length (chunked), the limit holds as the body streams.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        vec![Ok(vec![b'x'; 800]), Ok(vec![b'x'; 800])];
    let r = client()
        .post(format!("{url}/echo"))
        .header("idempotency-key", "big-req-2")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .expect("request");
    problem(r, StatusCode::PAYLOAD_TOO_LARGE, "request-too-large").await;
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn response_too_large_to_record_is_served_once_and_never_run_again() {
    let (url, runs) = start(RecordPolicy::default()).await;
    let r = post_json(&format!("{url}/big"), Some(b"big-resp"), "{}").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(!r.headers().contains_key("idempotent-replayed"));
    assert_eq!(r.bytes().await.expect("body").len(), 10_000, "served whole");
    // The handler ran: the retry must not run it again, and is told why it
    // cannot have the original answer.
    let retry = post_json(&format!("{url}/big"), Some(b"big-resp"), "{}").await;
    assert_eq!(retry.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(retry.headers()["content-type"], "application/problem+json");
    let problem: serde_json::Value = retry.json().await.expect("problem json");
    assert_eq!(problem["type"], "urn:idem:problem:response-not-recorded");
    assert_eq!(runs.count(), 1, "the handler ran once");
}

#[tokio::test]
async fn uncovered_methods_pass_through_without_a_key() {
    let (url, _) = start(RecordPolicy::default()).await;
    let r = client()
        .get(format!("{url}/echo"))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.expect("body"), "plain get");
}

#[tokio::test]
async fn scopes_separate_keys() {
    let (url, runs) = start(RecordPolicy::default()).await;
    for tenant in ["t1", "t2"] {
        let r = client()
            .post(format!("{url}/echo"))
            .header("idempotency-key", "shared")
            .header("x-tenant", tenant)
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), StatusCode::CREATED);
        assert!(!r.headers().contains_key("idempotent-replayed"));
    }
    assert_eq!(runs.count(), 2);
}
