//! The HTTP semantics table, row by row, on a real socket with a real HTTP
//! client, for every HTTP adapter: each adapter's test file serves the same
//! routes (`POST /echo`, `GET /echo`, `POST /slow`, `POST /flaky`,
//! `POST /big`, scoped by `x-tenant`, 1 KiB request and 4 KiB response
//! limits) and runs this table against them with [`table!`].

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderValue, StatusCode};
use idem_axum::RecordPolicy;
use idem_core::{Engine, IdempotencyKey, MemoryStore, RecordId, RecordInfoState, Scope};
use idem_tests::{send_and_hang_up, DownStore, HangUp, SlowBegin};

/// How many times the handlers ran.
#[derive(Clone, Default)]
pub struct Runs(pub Arc<AtomicUsize>);

impl Runs {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Counts a run; returns its number.
    pub fn next(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// The body `/echo` answers: the request body, the run number, and bytes
/// that are not UTF-8.
pub fn echo_body(body: &[u8], run: usize) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(format!("|run={run}|").as_bytes());
    out.extend_from_slice(&[0, 159, 255]);
    out
}

/// The headers `/echo` answers with: repeated names, a location, a binary
/// content type and the run number.
pub fn echo_headers(run: usize) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
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
    headers.insert("x-run", HeaderValue::from(run));
    headers
}

/// How long `/slow` takes.
pub const SLOW: Duration = Duration::from_millis(1500);

/// Serves the table's routes over `engine`, counting runs in `runs`;
/// returns the base URL.
pub type Start = fn(Engine, Runs, RecordPolicy) -> Pin<Box<dyn Future<Output = String> + Send>>;

/// An adapter under test.
#[derive(Clone, Copy)]
pub struct Adapter {
    /// Serves the table's routes.
    pub start: Start,
    /// Whether responses keep the order of differently named headers as
    /// the handler set them. actix-web keeps headers in a hash map, so their
    /// order across names is its own on every response, replayed or not
    /// (RFC 9110 §5.3: that order carries no meaning); the order of one
    /// name's values is kept everywhere.
    pub keeps_header_order: bool,
    /// Whether the server drops a request whose client closed its socket
    /// with a FIN while it waited for the answer. hyper does (it reads the
    /// end of the stream); actix-web does only on RST, and with a FIN it
    /// finishes the request as if the client were still there.
    pub drops_on_fin: bool,
}

async fn start(adapter: Adapter, record: RecordPolicy) -> (String, Runs) {
    let runs = Runs::default();
    let url = (adapter.start)(Engine::new(MemoryStore::new()), runs.clone(), record).await;
    (url, runs)
}

/// One `#[tokio::test]` per row of the table, against the `Adapter`
/// `$adapter`.
#[macro_export]
macro_rules! table {
    ($adapter:expr) => {
        $crate::table!(@rows $adapter;
            missing_key_is_400_and_runs_nothing,
            malformed_keys_are_400_and_name_the_rule,
            a_255_character_key_works_and_quoted_keys_are_the_same_key,
            replay_is_byte_identical_with_every_header_value,
            reencoded_json_replays_and_other_json_is_422_with_nothing_of_the_first_answer,
            query_parameter_order_does_not_matter,
            a_retry_that_changed_only_its_sent_at_gets_the_first_answer,
            duplicate_in_flight_is_409_with_retry_after,
            sixty_four_concurrent_duplicates_run_the_handler_once,
            client_that_hangs_up_mid_request_and_retries_gets_the_first_answer,
            client_that_hangs_up_before_its_request_is_claimed_runs_nothing_and_its_retry_runs_once,
            store_down_is_503_with_retry_after_and_runs_nothing,
            server_errors_are_not_recorded_by_default,
            record_all_policy_records_server_errors,
            oversized_request_is_413_before_anything_runs,
            response_too_large_to_record_is_served_once_and_never_run_again,
            uncovered_methods_pass_through_without_a_key,
            scopes_separate_keys,
        );
    };
    (@rows $adapter:expr; $($row:ident,)*) => {
        $(
            #[tokio::test]
            async fn $row() {
                http_semantics::$row($adapter).await;
            }
        )*
    };
}

pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

pub async fn post_json(url: &str, key: Option<&[u8]>, body: &str) -> reqwest::Response {
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
pub async fn snapshot(r: reqwest::Response) -> (StatusCode, Vec<(String, Vec<u8>)>, Vec<u8>) {
    let status = r.status();
    let headers = r
        .headers()
        .iter()
        .filter(|(n, _)| *n != header::DATE)
        .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
        .collect();
    (status, headers, r.bytes().await.expect("body").to_vec())
}

pub async fn problem(
    r: reqwest::Response,
    status: StatusCode,
    type_suffix: &str,
) -> serde_json::Value {
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

pub async fn missing_key_is_400_and_runs_nothing(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
    let r = post_json(&format!("{url}/echo"), None, "{}").await;
    let body = problem(r, StatusCode::BAD_REQUEST, "key-missing").await;
    assert!(body["detail"]
        .as_str()
        .unwrap_or("")
        .contains("Idempotency-Key"));
    assert_eq!(runs.count(), 0);
}

pub async fn malformed_keys_are_400_and_name_the_rule(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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

pub async fn a_255_character_key_works_and_quoted_keys_are_the_same_key(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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

pub async fn replay_is_byte_identical_with_every_header_value(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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
        let mut expected = first.1.clone();
        if !adapter.keeps_header_order {
            headers.sort_by(|a, b| a.0.cmp(&b.0));
            expected.sort_by(|a, b| a.0.cmp(&b.0));
        }
        assert_eq!(
            headers, expected,
            "every header, repeated ones included, in order"
        );
        assert_eq!(body, first.2, "the body byte for byte");
    }
    assert_eq!(runs.count(), 1);
}

pub async fn reencoded_json_replays_and_other_json_is_422_with_nothing_of_the_first_answer(
    adapter: Adapter,
) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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

/// Each adapter leaves `/sent_at` out of the fingerprint: a client that
/// stamps each attempt is answered from the first one's record.
pub async fn a_retry_that_changed_only_its_sent_at_gets_the_first_answer(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
    let url = format!("{url}/echo");
    let first = post_json(
        &url,
        Some(b"stamped"),
        r#"{"amount":1000,"sent_at":"10:00"}"#,
    )
    .await;
    let (status, _, first_body) = snapshot(first).await;
    assert_eq!(status, StatusCode::CREATED);
    let retry = post_json(
        &url,
        Some(b"stamped"),
        r#"{"sent_at":"10:05","amount":1000}"#,
    )
    .await;
    assert!(retry.headers().contains_key("idempotent-replayed"));
    let (status, _, retry_body) = snapshot(retry).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(retry_body, first_body, "the first answer, byte for byte");
    let other = post_json(
        &url,
        Some(b"stamped"),
        r#"{"amount":2000,"sent_at":"10:05"}"#,
    )
    .await;
    problem(other, StatusCode::UNPROCESSABLE_ENTITY, "key-reused").await;
    assert_eq!(runs.count(), 1);
}

pub async fn query_parameter_order_does_not_matter(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
    let a = post_json(&format!("{url}/echo?a=1&b=2"), Some(b"q"), "{}").await;
    assert_eq!(a.status(), StatusCode::CREATED);
    let b = post_json(&format!("{url}/echo?b=2&a=1"), Some(b"q"), "{}").await;
    assert!(b.headers().contains_key("idempotent-replayed"));
    assert_eq!(runs.count(), 1);
}

pub async fn duplicate_in_flight_is_409_with_retry_after(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
    let first = tokio::spawn({
        let url = url.clone();
        async move { post_json(&format!("{url}/slow"), Some(b"slow-1"), "{}").await }
    });
    // The first is running once its handler has started.
    let started = tokio::time::Instant::now() + SLOW;
    while runs.count() == 0 {
        assert!(tokio::time::Instant::now() < started, "the handler started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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

pub async fn sixty_four_concurrent_duplicates_run_the_handler_once(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
    let body = r#"{"amount":1000}"#;
    let sends = (0..64).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            snapshot(post_json(&format!("{url}/echo"), Some(b"dup-64"), body).await).await
        })
    });
    let answers: Vec<_> = futures_util::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.expect("request task"))
        .collect();
    assert_eq!(runs.count(), 1, "one execution for 64 duplicates");
    let executed: Vec<_> = answers
        .iter()
        .filter(|(status, headers, _)| {
            *status == StatusCode::CREATED
                && !headers.iter().any(|(n, _)| n == "idempotent-replayed")
        })
        .collect();
    assert_eq!(
        executed.len(),
        1,
        "exactly one answer is the execution itself"
    );
    for (status, _, body) in &answers {
        match *status {
            StatusCode::CREATED => {
                assert_eq!(body, &executed[0].2, "every replay is the first answer");
            }
            StatusCode::CONFLICT => {}
            other => panic!("a duplicate got {other}"),
        }
    }
}

pub async fn client_that_hangs_up_mid_request_and_retries_gets_the_first_answer(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
    let addr = url.trim_start_matches("http://");
    for (key, how) in [
        ("hangs-up-rst", HangUp::Reset),
        ("hangs-up-fin", HangUp::Close),
    ] {
        // The client gives up while the handler runs, and hangs up.
        send_and_hang_up(addr, "/slow", key, Duration::from_millis(300), how).await;
        // It retries until the first attempt's answer is there: the handler
        // was not cancelled with the connection, and it is not run again.
        let deadline = tokio::time::Instant::now() + SLOW * 3;
        loop {
            let r = post_json(
                &format!("{url}/slow"),
                Some(key.as_bytes()),
                r#"{"amount":1}"#,
            )
            .await;
            if r.status() == StatusCode::CONFLICT && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            assert_eq!(r.status(), StatusCode::OK, "{how:?}");
            assert_eq!(r.headers()["idempotent-replayed"], "true", "{how:?}");
            assert_eq!(r.text().await.expect("body"), "slow done");
            break;
        }
    }
    assert_eq!(runs.count(), 2, "the handler ran once per key");
}

pub async fn client_that_hangs_up_before_its_request_is_claimed_runs_nothing_and_its_retry_runs_once(
    adapter: Adapter,
) {
    // The store takes 400 ms to answer a claim; the client gives up after
    // 100 ms, before its request was claimed and before the handler started.
    let slow = SlowBegin::slow_begins(MemoryStore::new(), Duration::from_millis(400));
    let store = slow.clone();
    let runs = Runs::default();
    let url = (adapter.start)(Engine::new(slow), runs.clone(), RecordPolicy::default()).await;
    let addr = url.trim_start_matches("http://");
    let mut ran = 0;
    for (key, how) in [("early-rst", HangUp::Reset), ("early-fin", HangUp::Close)] {
        let before = store.answered();
        send_and_hang_up(addr, "/echo", key, Duration::from_millis(100), how).await;
        // Wait until its claim was answered and nothing holds the key:
        // released (the client was gone), or recorded (it ran to its end).
        let id = RecordId::new(&Scope::global(), &IdempotencyKey::parse(key).expect("key"));
        let deadline = tokio::time::Instant::now() + SLOW * 3;
        loop {
            let answered = store.answered() > before;
            let live = store.inner().inspect(&id).await.expect("inspect");
            let held = live.is_some_and(|r| matches!(r.state, RecordInfoState::InFlight { .. }));
            if answered && !held {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{how:?}: the claim settles"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let seen = matches!(how, HangUp::Reset) || adapter.drops_on_fin;
        if seen {
            // Long after the claim was answered: the handler did not run
            // for a client that was gone, and the key is free again.
            assert_eq!(
                runs.count(),
                ran,
                "{how:?}: nothing ran for a client that left"
            );
        } else {
            // The server never saw it go: the request ran to its end.
            assert_eq!(
                runs.count(),
                ran + 1,
                "{how:?}: it ran as if the client stayed"
            );
        }
        ran += 1;
        let r = post_json(
            &format!("{url}/echo"),
            Some(key.as_bytes()),
            r#"{"amount":1}"#,
        )
        .await;
        assert_eq!(r.status(), StatusCode::CREATED, "{how:?}");
        assert_eq!(
            r.headers().get("idempotent-replayed").is_some(),
            !seen,
            "{how:?}: the retry runs it if nothing ran, else replays it"
        );
        assert_eq!(runs.count(), ran, "{how:?}: run once in all");
        let again = post_json(
            &format!("{url}/echo"),
            Some(key.as_bytes()),
            r#"{"amount":1}"#,
        )
        .await;
        assert_eq!(again.headers()["idempotent-replayed"], "true");
    }
}

pub async fn store_down_is_503_with_retry_after_and_runs_nothing(adapter: Adapter) {
    let runs = Runs::default();
    let url = (adapter.start)(
        Engine::new(DownStore),
        runs.clone(),
        RecordPolicy::default(),
    )
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

pub async fn server_errors_are_not_recorded_by_default(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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

pub async fn record_all_policy_records_server_errors(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::All).await;
    let first = post_json(&format!("{url}/flaky"), Some(b"flaky-2"), "{}").await;
    assert_eq!(first.status(), StatusCode::SERVICE_UNAVAILABLE);
    let again = post_json(&format!("{url}/flaky"), Some(b"flaky-2"), "{}").await;
    assert!(again.headers().contains_key("idempotent-replayed"));
    assert_eq!(again.text().await.expect("body"), "attempt 1 failed");
    assert_eq!(runs.count(), 1);
}

pub async fn oversized_request_is_413_before_anything_runs(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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

pub async fn response_too_large_to_record_is_served_once_and_never_run_again(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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

pub async fn uncovered_methods_pass_through_without_a_key(adapter: Adapter) {
    let (url, _) = start(adapter, RecordPolicy::default()).await;
    let r = client()
        .get(format!("{url}/echo"))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.expect("body"), "plain get");
}

pub async fn scopes_separate_keys(adapter: Adapter) {
    let (url, runs) = start(adapter, RecordPolicy::default()).await;
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
