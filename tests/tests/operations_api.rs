//! The operators' routes (`idem_axum::admin_router`) beside the payments
//! service, over real sockets: support looks a customer's key up, clears it,
//! and the customer's next request runs again; a key still in flight is not
//! cleared unless forced, and forcing it fences the running request off.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use idem_core::{Engine, MemoryStore};
use idem_examples::payments::{router, App, MemoryLedger};
use idem_tests::{serve, Payments};
use serde_json::Value;

async fn start(debit_delay: Duration) -> (String, String) {
    let store = MemoryStore::new();
    let app = App {
        engine: Engine::new(store.clone()),
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay,
        provider: None,
    };
    let admin = serve(idem_axum::admin_router(app.engine.clone())).await;
    (serve(router(app)).await, admin)
}

async fn admin(method: reqwest::Method, url: &str, query: &str) -> (StatusCode, Value) {
    let r = reqwest::Client::new()
        .request(method, format!("{url}/records?{query}"))
        .send()
        .await
        .expect("admin request");
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn support_looks_a_key_up_clears_it_and_the_customer_s_retry_runs_again() {
    let (url, ops) = start(Duration::ZERO).await;
    let (status, first) = Payments::new(url.as_str())
        .try_debit_json("ann", "pay-1", 100)
        .await
        .expect("debit");
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(first["balance"], 9900);

    let (status, record) = admin(reqwest::Method::GET, &ops, "scope=ann&key=pay-1").await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(record["state"], "completed");
    assert!(record["outcome_bytes"].as_u64().unwrap_or(0) > 0);
    assert!(
        record.get("outcome").is_none(),
        "the outcome only when asked"
    );
    assert!(record["expires_in_ms"].as_u64().unwrap_or(0) > 0);

    let (_, shown) = admin(
        reqwest::Method::GET,
        &ops,
        "scope=ann&key=pay-1&outcome=true",
    )
    .await;
    assert_eq!(shown["outcome"]["status"], 201);
    assert!(
        shown["outcome"]["body"]
            .as_str()
            .unwrap_or("")
            .contains(first["debit_id"].as_str().unwrap_or("?")),
        "{shown}"
    );

    let (status, removed) = admin(reqwest::Method::DELETE, &ops, "scope=ann&key=pay-1").await;
    assert_eq!(
        (status, &removed["removed"]),
        (StatusCode::OK, &Value::Bool(true))
    );
    let (status, gone) = admin(reqwest::Method::GET, &ops, "scope=ann&key=pay-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(gone["type"], "urn:idem:problem:not-found");
    let (status, again) = admin(reqwest::Method::DELETE, &ops, "scope=ann&key=pay-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");

    let (status, retried) = Payments::new(url.as_str())
        .try_debit_json("ann", "pay-1", 100)
        .await
        .expect("debit");
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(retried["balance"], 9800, "cleared, the key runs again");
    assert_ne!(retried["debit_id"], first["debit_id"]);
}

#[tokio::test]
async fn a_key_in_flight_is_cleared_only_when_forced_and_the_running_request_is_fenced_off() {
    let (url, ops) = start(Duration::from_millis(600)).await;
    let running = tokio::spawn({
        let url = url.clone();
        async move {
            Payments::new(url.as_str())
                .try_debit_json("bob", "pay-2", 100)
                .await
                .expect("debit")
        }
    });
    // Until the running request holds its claim.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (status, record) = loop {
        let (status, record) = admin(reqwest::Method::GET, &ops, "scope=bob&key=pay-2").await;
        if status != StatusCode::NOT_FOUND {
            break (status, record);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the request never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        (status, &record["state"]),
        (StatusCode::OK, &Value::from("in_flight"))
    );
    assert!(record["lease_left_ms"].as_u64().unwrap_or(0) > 0);

    let (status, refused) = admin(reqwest::Method::DELETE, &ops, "scope=bob&key=pay-2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["type"], "urn:idem:problem:request-in-flight");
    let (status, _) = admin(
        reqwest::Method::DELETE,
        &ops,
        "scope=bob&key=pay-2&force=true",
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // The running request's claim was ended: its result is not recorded.
    let (status, answer) = running.await.expect("running debit");
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(answer["type"], "urn:idem:problem:lease-lost");
    let (status, _) = admin(reqwest::Method::GET, &ops, "scope=bob&key=pay-2").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "nothing recorded after the removal"
    );
}

#[tokio::test]
async fn a_malformed_key_is_a_problem() {
    let (_, ops) = start(Duration::ZERO).await;
    let long = "k".repeat(300);
    let (status, problem) = admin(reqwest::Method::GET, &ops, &format!("scope=x&key={long}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["type"], "urn:idem:problem:key-malformed");
}

/// The raw answer of the operators' routes: status, content type, `Allow`,
/// and the body as JSON (Null when it is not JSON).
async fn admin_raw(
    method: reqwest::Method,
    url: &str,
    query: &str,
) -> (StatusCode, String, String, Value) {
    let r = reqwest::Client::new()
        .request(method, format!("{url}/records?{query}"))
        .send()
        .await
        .expect("admin request");
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (content_type, allow) = (header("content-type"), header("allow"));
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    (
        status,
        content_type,
        allow,
        serde_json::from_str(&body).unwrap_or(Value::Null),
    )
}

/// An operator's mistakes: method, query, and the status, problem type and
/// words of the detail each gets.
const MISTAKES: &[(&str, &str, u16, &str, &str)] = &[
    ("GET", "scope=cat", 400, "bad-request", "`key` is missing"),
    (
        "DELETE",
        "scope=cat",
        400,
        "bad-request",
        "`key` is missing",
    ),
    (
        "GET",
        "scope=cat&key=pay-3&key=pay-4",
        400,
        "bad-request",
        "`key` is given more than once",
    ),
    (
        "DELETE",
        "scope=cat&scope=dan&key=pay-3",
        400,
        "bad-request",
        "`scope` is given more than once",
    ),
    (
        "GET",
        "scope=cat&key=pay-3&outcome=yes",
        400,
        "bad-request",
        "`outcome` is `yes`",
    ),
    (
        "DELETE",
        "scope=cat&key=pay-3&force=please",
        400,
        "bad-request",
        "`force` is `please`",
    ),
    (
        "DELETE",
        "scope=cat&key=pay-3&forse=true",
        400,
        "bad-request",
        "unknown query parameter `forse`",
    ),
    (
        "GET",
        "scope=cat&key=",
        400,
        "key-malformed",
        "the query parameter `key`",
    ),
    ("POST", "scope=cat&key=pay-3", 405, "method-not-allowed", ""),
    ("PUT", "scope=cat&key=pay-3", 405, "method-not-allowed", ""),
];

#[tokio::test]
async fn an_operator_s_mistyped_request_is_answered_with_a_problem_that_says_what_is_wrong() {
    let (url, ops) = start(Duration::ZERO).await;
    let (status, _) = Payments::new(url.as_str())
        .try_debit_json("cat", "pay-3", 100)
        .await
        .expect("debit");
    assert_eq!(status, StatusCode::CREATED);

    for (method, query, status, kind, detail) in MISTAKES {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let (got, content_type, allow, problem) = admin_raw(method.clone(), &ops, query).await;
        let what = format!("{method} ?{query}: {got} {content_type} {problem}");
        assert_eq!(got.as_u16(), *status, "{what}");
        assert_eq!(content_type, "application/problem+json", "{what}");
        assert_eq!(
            problem["type"],
            format!("urn:idem:problem:{kind}"),
            "{what}"
        );
        assert_eq!(problem["status"], *status, "{what}");
        let text = problem["detail"].as_str().unwrap_or("");
        assert!(text.contains(detail), "{what}");
        if *status == 405 {
            assert!(
                allow.contains("GET") && allow.contains("DELETE"),
                "{what}: Allow {allow}"
            );
        }
        if *kind == "key-malformed" {
            assert!(
                !problem["title"].as_str().unwrap_or("").contains("header"),
                "{what}"
            );
        }
    }

    // None of those touched the record; `force=1` is understood as true.
    let (status, record) = admin(reqwest::Method::GET, &ops, "scope=cat&key=pay-3&outcome=1").await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(record["outcome"]["status"], 201);
    let (status, _) = admin(reqwest::Method::DELETE, &ops, "scope=cat&key=pay-3&force=1").await;
    assert_eq!(status, StatusCode::OK);
}
