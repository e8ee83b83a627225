//! The payments example's `/metrics` over a real socket: after a debit, its
//! replay and a reused key, a scrape shows each decision once, the store's
//! call durations, and no claim held.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore};
use idem_examples::payments::{router, App, MemoryLedger, RedisLedger};
use idem_redis::RedisStore;
use idem_tests::{redis_url, serve, unique_prefix, Payments};

fn value(scrape: &str, line_start: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn a_scrape_shows_each_decision_and_the_store_s_latency() {
    let metrics = serve(idem_examples::metrics::router().expect("recorder")).await;
    let store = MemoryStore::new();
    let url = serve(router(App {
        engine: Engine::new(store.clone()),
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await;
    let payments = Payments::new(url.as_str());
    assert_eq!(payments.debit("acct-1", "m-1", 100).await.status(), 201);
    assert_eq!(payments.debit("acct-1", "m-1", 100).await.status(), 201);
    assert_eq!(payments.debit("acct-1", "m-1", 200).await.status(), 422);

    let scrape = reqwest::get(format!("{metrics}/metrics"))
        .await
        .expect("scrape")
        .text()
        .await
        .expect("text");
    let decision = |outcome: &str| {
        value(
            &scrape,
            &format!("idem_decisions{{idem_operation=\"debit\",idem_outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(decision("executed"), Some(1.0), "{scrape}");
    assert_eq!(decision("replayed"), Some(1.0), "{scrape}");
    assert_eq!(decision("mismatch"), Some(1.0), "{scrape}");
    assert!(
        scrape.contains("idem_store_duration") && scrape.contains("idem_transition=\"begin\""),
        "{scrape}"
    );
    assert_eq!(value(&scrape, "idem_claims_held"), Some(0.0), "{scrape}");
    // A histogram with buckets (aggregatable, `histogram_quantile`), not a
    // summary: every begin took less than 5 s, and the three begins are
    // counted in the last bucket.
    assert!(
        scrape.contains("# TYPE idem_store_duration histogram"),
        "{scrape}"
    );
    assert!(
        !scrape.contains("idem_store_duration{"),
        "no quantiles: {scrape}"
    );
    let begins_under = |le: &str| {
        value(
            &scrape,
            &format!(
                "idem_store_duration_bucket{{idem_store=\"memory\",idem_transition=\"begin\",le=\"{le}\"}}"
            ),
        )
    };
    assert_eq!(begins_under("5"), Some(3.0), "{scrape}");
    assert_eq!(begins_under("+Inf"), Some(3.0), "{scrape}");
}

#[tokio::test]
async fn a_scrape_shows_how_many_retries_the_redis_replay_cache_answered() {
    let metrics = serve(idem_examples::metrics::router().expect("recorder")).await;
    let prefix = unique_prefix("metrics");
    let store = RedisStore::connect(&redis_url())
        .await
        .expect("redis")
        .with_prefix(&prefix)
        .with_replay_cache(1 << 20, Duration::from_mins(1));
    let ledger = RedisLedger::connect(&redis_url(), &store, &format!("{prefix}balance:"))
        .await
        .expect("ledger");
    let url = serve(router(App {
        engine: Engine::new(store),
        ledger: Arc::new(ledger),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await;
    let payments = Payments::new(url.as_str());
    assert_eq!(payments.debit("acct-1", "c-1", 100).await.status(), 201);
    let scrape = || async {
        reqwest::get(format!("{metrics}/metrics"))
            .await
            .expect("scrape")
            .text()
            .await
            .expect("text")
    };
    let event = |scrape: &str, event: &str| {
        value(
            scrape,
            &format!("idem_replay_cache{{idem_event=\"{event}\"}}"),
        )
        .unwrap_or(0.0)
    };
    // Retries until one is answered from the cache (it fills once the
    // wake channel is subscribed), then 10 more.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while event(&scrape().await, "hit") < 1.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no hit within 2 s: {}",
            scrape().await
        );
        assert_eq!(payments.debit("acct-1", "c-1", 100).await.status(), 201);
    }
    for _ in 0..10 {
        assert_eq!(payments.debit("acct-1", "c-1", 100).await.status(), 201);
    }
    let scrape = scrape().await;
    assert!(event(&scrape, "hit") >= 11.0, "{scrape}");
    assert!(
        event(&scrape, "miss") >= 1.0,
        "the first retry asked Redis: {scrape}"
    );
    assert!(
        value(&scrape, "idem_replay_cache_bytes").is_some_and(|b| b > 0.0),
        "{scrape}"
    );
}
