//! Two `payments` instances sharing one Redis: records and balances in Redis,
//! 64 concurrent duplicates spread over both instances debit once.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use idem_core::Engine;
use idem_examples::payments::{router, Account, App, RedisLedger};
use idem_redis::RedisStore;
use idem_tests::{redis_url, serve, unique_prefix};

async fn instance(prefix: &str, delay: Duration) -> String {
    let store = RedisStore::connect(&redis_url())
        .await
        .expect("redis")
        .with_prefix(&format!("{prefix}idem:"));
    let ledger = RedisLedger::connect(&redis_url(), &store, &format!("{prefix}balance:"))
        .await
        .expect("redis ledger");
    serve(router(App {
        engine: Engine::new(store),
        ledger: Arc::new(ledger),
        debit_delay: delay,
        provider: None,
    }))
    .await
}

/// The one debit every request here repeats.
async fn debit(c: &reqwest::Client, url: &str) -> reqwest::Response {
    c.post(format!("{url}/accounts/zoe/debits"))
        .header("idempotency-key", "shared-64")
        .header(header::CONTENT_TYPE, "application/json")
        .body(r#"{"amount":1000}"#)
        .send()
        .await
        .expect("request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_sharing_redis_debit_once_under_64_duplicates() {
    let prefix = unique_prefix("payments");
    let a = instance(&prefix, Duration::from_millis(300)).await;
    let b = instance(&prefix, Duration::from_millis(300)).await;
    let c = reqwest::Client::new();
    let start = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for i in 0..64 {
        let url = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (c, start) = (c.clone(), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let r = debit(&c, &url).await;
            let replayed = r.headers().contains_key("idempotent-replayed");
            let retry_after = r.headers().contains_key(header::RETRY_AFTER);
            (
                r.status(),
                replayed,
                retry_after,
                r.bytes().await.expect("body"),
            )
        }));
    }
    let mut originals = Vec::new();
    for t in tasks {
        let (status, replayed, retry_after, body) = t.await.expect("task");
        match status {
            StatusCode::CREATED if !replayed => originals.push(body),
            StatusCode::CREATED => {}
            StatusCode::CONFLICT => assert!(retry_after, "a 409 carries Retry-After"),
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(
        originals.len(),
        1,
        "exactly one of 64 duplicates over two instances ran"
    );
    // Each instance replays the one receipt, and both see one debit.
    for url in [&a, &b] {
        let r = debit(&c, url).await;
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.bytes().await.expect("body"), originals[0]);
        let account: Account = c
            .get(format!("{url}/accounts/zoe"))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        assert_eq!(account.balance, 9_000);
    }
}
