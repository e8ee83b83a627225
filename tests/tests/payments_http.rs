//! The payments example over a real socket: the double-debit story, 64
//! concurrent duplicates, scoping by account, recorded business failures,
//! and a store that is down.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use idem_core::{Engine, MemoryStore, Store};
use idem_examples::payments::{router, Account, App, MemoryLedger, Receipt};
use idem_tests::{serve, DownStore};

async fn start(store: impl Store, delay: Duration) -> String {
    serve(router(App {
        engine: Engine::new(store),
        ledger: Arc::new(MemoryLedger::default()),
        debit_delay: delay,
    }))
    .await
}

async fn balance(client: &reqwest::Client, url: &str, account: &str) -> u64 {
    let a: Account = client
        .get(format!("{url}/accounts/{account}"))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("account json");
    a.balance
}

async fn debit(
    client: &reqwest::Client,
    url: &str,
    account: &str,
    key: &str,
    body: &str,
) -> reqwest::Response {
    client
        .post(format!("{url}/accounts/{account}/debits"))
        .header("idempotency-key", key)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn a_lost_answer_retried_debits_once() {
    let url = start(MemoryStore::new(), Duration::ZERO).await;
    let c = reqwest::Client::new();
    assert_eq!(balance(&c, &url, "alice").await, 10_000);
    let first = debit(&c, &url, "alice", "pay-1", r#"{"amount":1000}"#).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let receipt: Receipt = first.json().await.expect("receipt");
    assert_eq!((receipt.amount, receipt.balance), (1000, 9000));
    // The answer was lost; the client retries with the same key.
    let retry = debit(&c, &url, "alice", "pay-1", r#"{"amount":1000}"#).await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(
        retry
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let replayed: Receipt = retry.json().await.expect("receipt");
    assert_eq!(replayed, receipt, "the same receipt, same debit id");
    assert_eq!(
        balance(&c, &url, "alice").await,
        9_000,
        "debited once, not twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_duplicates_debit_once() {
    let url = start(MemoryStore::new(), Duration::from_millis(300)).await;
    let c = reqwest::Client::new();
    let start = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (c, url, start) = (c.clone(), url.clone(), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let r = debit(&c, &url, "bob", "dup-64", r#"{"amount":1000}"#).await;
            let status = r.status();
            let retry_after = r.headers().get(header::RETRY_AFTER).cloned();
            let replayed = r.headers().contains_key("idempotent-replayed");
            let location = r.headers().get(header::LOCATION).cloned();
            (
                status,
                retry_after,
                replayed,
                location,
                r.bytes().await.expect("body"),
            )
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("task"));
    }
    let created: Vec<_> = answers
        .iter()
        .filter(|a| a.0 == StatusCode::CREATED)
        .collect();
    let conflicts: Vec<_> = answers
        .iter()
        .filter(|a| a.0 == StatusCode::CONFLICT)
        .collect();
    assert_eq!(
        created.len() + conflicts.len(),
        64,
        "only 201 or 409 answers"
    );
    assert!(
        conflicts.iter().all(|a| a.1.is_some()),
        "every 409 has Retry-After"
    );
    let originals: Vec<_> = created.iter().filter(|a| !a.2).collect();
    assert_eq!(originals.len(), 1, "exactly one request ran the debit");
    let original = originals[0];
    for a in &created {
        assert_eq!(a.4, original.4, "every 201 is the identical receipt");
        assert_eq!(a.3, original.3, "and the identical Location");
    }
    // The stragglers retry until they get the recorded answer.
    for _ in 0..conflicts.len() {
        let r = debit(&c, &url, "bob", "dup-64", r#"{"amount":1000}"#).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.bytes().await.expect("body"), original.4);
    }
    assert_eq!(balance(&c, &url, "bob").await, 9_000);
}

#[tokio::test]
async fn the_same_key_on_two_accounts_is_two_debits() {
    let url = start(MemoryStore::new(), Duration::ZERO).await;
    let c = reqwest::Client::new();
    for account in ["carol", "dave"] {
        let r = debit(&c, &url, account, "same-key", r#"{"amount":2500}"#).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        assert!(!r.headers().contains_key("idempotent-replayed"));
    }
    assert_eq!(balance(&c, &url, "carol").await, 7_500);
    assert_eq!(balance(&c, &url, "dave").await, 7_500);
}

#[tokio::test]
async fn insufficient_funds_is_recorded_and_replayed() {
    let url = start(MemoryStore::new(), Duration::ZERO).await;
    let c = reqwest::Client::new();
    let first = debit(&c, &url, "erin", "too-much", r#"{"amount":20000}"#).await;
    assert_eq!(first.status(), StatusCode::PAYMENT_REQUIRED);
    let first_body = first.bytes().await.expect("body");
    // Money arrives in between? No: the answer for this key stays the same.
    let again = debit(&c, &url, "erin", "too-much", r#"{"amount":20000}"#).await;
    assert_eq!(again.status(), StatusCode::PAYMENT_REQUIRED);
    assert!(again.headers().contains_key("idempotent-replayed"));
    assert_eq!(again.bytes().await.expect("body"), first_body);
    assert_eq!(balance(&c, &url, "erin").await, 10_000);
}

#[tokio::test]
async fn key_length_limit_and_reencoded_body() {
    let url = start(MemoryStore::new(), Duration::ZERO).await;
    let c = reqwest::Client::new();
    let ok_key = "a".repeat(255);
    let r = debit(&c, &url, "frank", &ok_key, r#"{"amount":100}"#).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let r = debit(&c, &url, "frank", &ok_key, "{\n  \"amount\" : 100\n}").await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(
        r.headers().contains_key("idempotent-replayed"),
        "a re-encoded body is the same request"
    );
    let r = debit(&c, &url, "frank", &"a".repeat(256), r#"{"amount":100}"#).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = debit(&c, &url, "frank", &ok_key, r#"{"amount":101}"#).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(balance(&c, &url, "frank").await, 9_900);
}

#[tokio::test]
async fn a_store_that_fails_gives_503_and_no_debit() {
    let url = start(DownStore, Duration::ZERO).await;
    let c = reqwest::Client::new();
    let r = debit(&c, &url, "gina", "down", r#"{"amount":1000}"#).await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key(header::RETRY_AFTER));
    assert_eq!(balance(&c, &url, "gina").await, 10_000);
}
