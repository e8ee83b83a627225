//! The payments service behind Sentinel in the durable mode, as the README
//! runs it: its records (the store) and its balances (the ledger, through
//! the store's connection) on the primary the Sentinels name. The primary
//! is killed while forty debits are under way, its replicas held back just
//! before; every debit is eventually acknowledged, the balance shows each
//! exactly once, and each retry answers the receipt its client was first
//! given: nothing an answer promised was lost with the old primary.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::Engine;
use idem_examples::payments::{router, App, RedisLedger};
use idem_redis::RedisStore;
use idem_tests::sentinel::{PrivateSentinels, SERVICE};
use idem_tests::{serve, Payments, Server};

const DEBITS: u64 = 40;

async fn payments(topology: &PrivateSentinels) -> String {
    let store = RedisStore::connect_sentinel(topology.sentinel_urls(), SERVICE)
        .await
        .expect("the Sentinels name a primary")
        .with_prefix("payments:idem:")
        .with_timeout(Duration::from_secs(1))
        .with_replication(1, Duration::from_millis(500));
    let ledger = RedisLedger::on_store(&store, "payments:balance:");
    serve(router(App {
        engine: Engine::new(store),
        ledger: Arc::new(ledger),
        debit_delay: Duration::from_millis(20),
        provider: None,
    }))
    .await
}

/// Sends debit `n` (of `n` cents) until it is acknowledged, with the same
/// key every time; panics if it is not within a minute.
async fn debit_until_acknowledged(client: reqwest::Client, url: String, n: u64) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let sent = client
            .post(format!("{url}/accounts/fo/debits"))
            .header("idempotency-key", format!("failover-debit-{n}"))
            .header("content-type", "application/json")
            .body(format!(r#"{{"amount":{n}}}"#))
            .send()
            .await;
        if let Ok(answer) = sent {
            if answer.status().as_u16() == 201 {
                return answer.text().await.unwrap_or_default();
            }
            let status = answer.status().as_u16();
            assert!(
                matches!(status, 409 | 503),
                "debit {n}: only in flight or unavailable may ask for a retry, got {status}"
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "debit {n} was not acknowledged within a minute"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_failover_under_load_loses_no_debit_and_doubles_none(server: Server) {
    let mut topology = PrivateSentinels::start_on(server);
    let url = payments(&topology).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let opening = Payments::with_client(client.clone(), url.as_str())
        .balance_when_up("fo", Duration::from_mins(1))
        .await;

    let acknowledged = Arc::new(AtomicUsize::new(0));
    let debits: Vec<_> = (1..=DEBITS)
        .map(|n| {
            let (client, url, acknowledged) =
                (client.clone(), url.clone(), Arc::clone(&acknowledged));
            tokio::spawn(async move {
                let receipt = debit_until_acknowledged(client, url, n).await;
                acknowledged.fetch_add(1, Ordering::SeqCst);
                receipt
            })
        })
        .collect();
    // Once some debits are acknowledged, the replicas stop receiving:
    // whatever the primary acknowledges now is on it alone. Without the
    // durable mode, more debits are acknowledged in that window; with it,
    // none is (their changes reach no replica), so the window ends after
    // two seconds. Then the primary dies.
    while acknowledged.load(Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    topology.hold_replication(true);
    let window = tokio::time::Instant::now() + Duration::from_secs(2);
    while acknowledged.load(Ordering::SeqCst) < 15 && tokio::time::Instant::now() < window {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let old = tokio::task::block_in_place(|| topology.kill_primary());
    tokio::task::block_in_place(|| topology.wait_for_promotion(old));
    let mut receipts = Vec::new();
    for debit in debits {
        receipts.push(debit.await.expect("a debit task"));
    }

    let debited: u64 = (1..=DEBITS).sum();
    assert_eq!(
        Payments::with_client(client.clone(), url.as_str())
            .balance_when_up("fo", Duration::from_mins(1))
            .await,
        opening - debited,
        "every acknowledged debit once: none lost with the old primary, none run twice"
    );
    // Each debit's retry now answers the receipt its client was given: an
    // acknowledged debit whose record the failover lost would run again
    // under another receipt (and, with a real card processor, charge twice).
    for (n, receipt) in (1..=DEBITS).zip(&receipts) {
        let again = debit_until_acknowledged(client.clone(), url.clone(), n).await;
        assert_eq!(&again, receipt, "debit {n}'s replay");
    }
}

idem_tests::on_redis_and_valkey!(a_failover_under_load_loses_no_debit_and_doubles_none);
