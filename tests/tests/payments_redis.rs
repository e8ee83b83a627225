//! Two `payments` instances sharing one Redis: records and balances in Redis,
//! 64 concurrent duplicates spread over both instances debit once; with
//! replay caches too, and their retries answer the bytes Redis's replay
//! answers.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use idem_core::Engine;
use idem_examples::payments::{router, App, RedisLedger};
use idem_redis::RedisStore;
use idem_tests::{redis_url, serve, unique_prefix, Payments};

async fn instance(prefix: &str, delay: Duration, replay_cache: bool) -> String {
    let store = RedisStore::connect(&redis_url())
        .await
        .expect("redis")
        .with_prefix(&format!("{prefix}idem:"));
    let store = if replay_cache {
        store.with_replay_cache(1 << 20, Duration::from_mins(1))
    } else {
        store
    };
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_sharing_redis_debit_once_under_64_duplicates() {
    let prefix = unique_prefix("payments");
    let a = instance(&prefix, Duration::from_millis(300), false).await;
    let b = instance(&prefix, Duration::from_millis(300), false).await;
    sixty_four_duplicates_debit_once(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replay_caches_retries_answer_redis_s_bytes_and_debit_once() {
    let prefix = unique_prefix("payments");
    let a = instance(&prefix, Duration::from_millis(300), true).await;
    let b = instance(&prefix, Duration::from_millis(300), true).await;
    sixty_four_duplicates_debit_once(&a, &b).await;
    // Each instance's first retry here is answered by Redis (or by its
    // cache, if an earlier one filled it); the later ones by its cache,
    // once its wake channel is subscribed. Every answer is the same bytes
    // on the wire, but for its `date`.
    for url in [&a, &b] {
        let first = raw_retry(url).await;
        assert!(first.starts_with("HTTP/1.1 201 Created\r\n"), "{first}");
        assert!(
            first.contains("\r\nidempotent-replayed: true\r\n"),
            "{first}"
        );
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(raw_retry(url).await, first);
        }
    }
    let c = reqwest::Client::new();
    for url in [&a, &b] {
        assert_eq!(
            Payments::with_client(c.clone(), url.as_str())
                .balance("zoe")
                .await,
            9_000
        );
    }
}

/// The debit's retry over a plain HTTP/1.1 connection: the answer's bytes,
/// without its `date` line.
async fn raw_retry(url: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = url.strip_prefix("http://").expect("an http:// URL");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let body = r#"{"amount":1000}"#;
    let request = format!(
        "POST /accounts/zoe/debits HTTP/1.1\r\nhost: {addr}\r\nidempotency-key: shared-64\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    String::from_utf8(answer)
        .expect("a UTF-8 answer")
        .split("\r\n")
        .filter(|line| !line.to_ascii_lowercase().starts_with("date:"))
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// 64 concurrent duplicates, half on each instance: one runs, the others
/// replay or are told it is in flight; each instance then replays the one
/// receipt and both see one debit.
async fn sixty_four_duplicates_debit_once(a: &str, b: &str) {
    let (a, b) = (a.to_owned(), b.to_owned());
    let c = reqwest::Client::new();
    let start = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for i in 0..64 {
        let url = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (c, start) = (c.clone(), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let r = Payments::with_client(c, &url)
                .debit("zoe", "shared-64", 1000)
                .await;
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
        let r = Payments::with_client(c.clone(), url.as_str())
            .debit("zoe", "shared-64", 1000)
            .await;
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.bytes().await.expect("body"), originals[0]);
        assert_eq!(
            Payments::with_client(c.clone(), url.as_str())
                .balance("zoe")
                .await,
            9_000
        );
    }
}
