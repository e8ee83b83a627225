//! The client that gives up: it sends a debit, hangs up (RST or FIN) at some
//! point of the request's life, and retries with the same key. On every
//! store, with the ledger where production keeps it, no account is debited
//! twice and every key reaches its final answer long before the lease ends.
//!
//! The ledger answers a few milliseconds after it moved the money (a payment
//! provider whose reply is on its way back), so that hang-ups land before the
//! claim is answered, while the provider is called, between the effect and
//! its record, and while the record is written.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;
use idem_core::{Claim, Engine, Store};
use idem_examples::payments::{
    router, Account, App, Ledger, LedgerError, MemoryLedger, PgLedger, RedisLedger, Respond,
};
use idem_tests::{
    pg_store, redis_cluster_nodes, redis_url, send_and_hang_up, serve, unique_prefix, HangUp,
};

/// A ledger whose answer arrives `after` the money moved.
struct SlowAnswer {
    inner: Arc<dyn Ledger>,
    after: Duration,
}

#[idem_core::store::async_trait]
impl Ledger for SlowAnswer {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        self.inner.balance(account).await
    }

    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError> {
        let done = self.inner.debit(account, amount).await;
        tokio::time::sleep(self.after).await;
        done
    }

    async fn debit_and_record(
        &self,
        account: &str,
        amount: u64,
        claim: &Claim,
        respond: Respond<'_>,
    ) -> Response {
        // The ledger's own way: every ledger commits the debit with its
        // record, while the claim holds.
        let response = self
            .inner
            .debit_and_record(account, amount, claim, respond)
            .await;
        tokio::time::sleep(self.after).await;
        response
    }
}

/// How long the provider takes before moving the money, and after.
const PROVIDER: Duration = Duration::from_millis(3);

/// The lease the service runs with; every key must be final well before it.
const LEASE: Duration = Duration::from_secs(10);

/// How soon after the hang-up a retried key must have its final answer.
const FINAL_WITHIN: Duration = Duration::from_secs(3);

async fn start(store: impl Store, ledger: Arc<dyn Ledger>) -> String {
    let engine = Engine::new(store).with_policy(idem_core::Policy::default().lease(LEASE));
    let url = serve(router(App {
        engine,
        ledger: Arc::new(SlowAnswer {
            inner: ledger,
            after: PROVIDER,
        }),
        debit_delay: PROVIDER,
        provider: None,
    }))
    .await;
    url.trim_start_matches("http://").to_owned()
}

/// Retries `key` until it gets a final answer; returns its status.
async fn retry_until_final(c: &reqwest::Client, addr: &str, path: &str, key: &str) -> StatusCode {
    let deadline = tokio::time::Instant::now() + FINAL_WITHIN;
    loop {
        let r = c
            .post(format!("http://{addr}{path}"))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(r#"{"amount":1}"#)
            .send()
            .await
            .expect("retry");
        let status = r.status();
        if status != StatusCode::CONFLICT {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "key {key} still answers 409 {FINAL_WITHIN:?} after its client hung up \
             (lease {LEASE:?}): nothing runs it, yet it is claimed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `tries` clients, each hanging up at another point (0 to 12 ms after the
/// request was written, RST and FIN alternately) and then retrying until
/// their key is final: every key ends in 201, in time.
async fn hang_up_and_retry(addr: &str, path: &str, tries: usize) {
    let c = reqwest::Client::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = Vec::new();
    for i in 0..tries {
        let (addr, path, c, gate) = (
            addr.to_owned(),
            path.to_owned(),
            c.clone(),
            Arc::clone(&gate),
        );
        tasks.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.expect("semaphore");
            let key = format!("gives-up-{i}");
            let after = Duration::from_micros(250 * (i % 49) as u64);
            let how = if i % 2 == 0 {
                HangUp::Reset
            } else {
                HangUp::Close
            };
            send_and_hang_up(&addr, &path, &key, after, how).await;
            let status = retry_until_final(&c, &addr, &path, &key).await;
            (key, status)
        }));
    }
    for t in tasks {
        let (key, status) = t.await.expect("client task");
        assert_eq!(status, StatusCode::CREATED, "key {key} ends in a debit");
    }
}

/// Hang-ups and retries on the payments service: the account is debited
/// exactly once per key.
async fn hang_ups_never_debit_twice(addr: String, tries: usize) {
    let account = format!("acct{tries}");
    hang_up_and_retry(&addr, &format!("/accounts/{account}/debits"), tries).await;
    let c = reqwest::Client::new();
    let a: Account = c
        .get(format!("http://{addr}/accounts/{account}"))
        .send()
        .await
        .expect("balance")
        .json()
        .await
        .expect("account json");
    let debits = 10_000 - a.balance;
    assert_eq!(
        debits, tries as u64,
        "{tries} keys, each retried after its client hung up, must debit {tries} times, not {debits}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_and_retry_are_debited_once_on_memory() {
    let store = idem_core::MemoryStore::new();
    let addr = start(store.clone(), Arc::new(MemoryLedger::new(&store))).await;
    hang_ups_never_debit_twice(addr, 300).await;
}

/// Hang-ups and retries with the records in `store` (under `prefix`) and
/// the balances in Redis, as the payments example keeps them.
async fn on_redis(store: idem_redis::RedisStore, prefix: &str) {
    let store = store.with_prefix(&format!("{prefix}idem:"));
    let ledger = RedisLedger::connect(&redis_url(), &store, &format!("{prefix}balance:"))
        .await
        .expect("redis ledger");
    let addr = start(store, Arc::new(ledger)).await;
    hang_ups_never_debit_twice(addr, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_and_retry_are_debited_once_on_redis() {
    let store = idem_redis::RedisStore::connect(&redis_url())
        .await
        .expect("redis");
    on_redis(store, &unique_prefix("gives-up")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_and_retry_are_debited_once_on_redis_cluster() {
    let store = idem_redis::RedisStore::connect_cluster(redis_cluster_nodes())
        .await
        .expect("redis cluster");
    on_redis(store, &unique_prefix("gives-up-cluster")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_and_retry_are_debited_once_on_postgres() {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    let addr = start(store, Arc::new(ledger)).await;
    hang_ups_never_debit_twice(addr, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_and_retry_are_debited_once_on_mariadb() {
    let store = idem_tests::mysql_store().await;
    let accounts = format!("{}_accounts", store.table());
    let ledger = idem_examples::mysql_ledger::MySqlLedger::new(store.clone(), &accounts);
    ledger.migrate().await.expect("ledger migration");
    let addr = start(store, Arc::new(ledger)).await;
    hang_ups_never_debit_twice(addr, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_and_retry_are_charged_once_behind_the_layer() {
    // A router made idempotent by the layer, around a handler that charges
    // (after a provider delay) and answers a few milliseconds later.
    let charges = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Arc::clone(&charges);
    let handler = move || {
        let counted = Arc::clone(&counted);
        async move {
            tokio::time::sleep(PROVIDER).await;
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(PROVIDER).await;
            (StatusCode::CREATED, "charged")
        }
    };
    let engine = Engine::new(idem_core::MemoryStore::new())
        .with_policy(idem_core::Policy::default().lease(LEASE));
    let url = serve(
        axum::Router::new()
            .route("/charges", axum::routing::post(handler))
            .layer(idem_axum::IdempotencyLayer::new(engine)),
    )
    .await;
    let tries = 200;
    hang_up_and_retry(url.trim_start_matches("http://"), "/charges", tries).await;
    assert_eq!(
        charges.load(std::sync::atomic::Ordering::SeqCst),
        tries as u64,
        "one charge per key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_panics_after_charging_is_not_run_again_while_its_lease_lives() {
    let charges = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Arc::clone(&charges);
    let handler = move || {
        let counted = Arc::clone(&counted);
        async move {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert!(n > 0, "the provider's answer could not be parsed");
            (StatusCode::CREATED, "charged")
        }
    };
    let engine = Engine::new(idem_core::MemoryStore::new())
        .with_policy(idem_core::Policy::default().lease(Duration::from_millis(800)));
    let url = serve(
        axum::Router::new()
            .route("/charges", axum::routing::post(handler))
            .layer(idem_axum::IdempotencyLayer::new(engine)),
    )
    .await;
    let c = reqwest::Client::new();
    let post = || {
        c.post(format!("{url}/charges"))
            .header("idempotency-key", "panics-1")
            .send()
    };
    let first = post().await.expect("an answer, not a dropped connection");
    assert_eq!(first.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let problem: serde_json::Value = first.json().await.expect("problem");
    assert_eq!(problem["type"], "urn:idem:problem:handler-failed");
    let retry = post().await.expect("retry");
    assert_eq!(
        retry.status(),
        StatusCode::CONFLICT,
        "its outcome is unknown: not run again"
    );
    assert_eq!(charges.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Until the lease ends the retry is told 409; then it runs (and the
    // provider answers this time).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after = loop {
        let answer = post().await.expect("a retry");
        if answer.status() != StatusCode::CONFLICT {
            break answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still in flight 10 s after a lease of 800 ms"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(after.status(), StatusCode::CREATED);
    assert_eq!(charges.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// Sends a debit of 1 for `key` on a raw socket and reads its whole answer.
async fn debit_and_read(addr: &str, path: &str, key: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let request = idem_tests::debit_request(addr, path, key, true);
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("the answer");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_whose_client_hangs_up_while_it_waits_leaves_nothing_running() {
    // The first debit takes 3 s; its duplicate waits for it (the policy
    // waits up to 10 s) and its client hangs up after 100 ms. Nothing has
    // run for the duplicate, so nothing of it may outlive its client: no
    // task waiting on for nobody.
    let store = idem_core::MemoryStore::new();
    let engine = Engine::new(store.clone()).with_policy(idem_core::Policy::default().on_in_flight(
        idem_core::OnInFlight::Wait {
            max: Duration::from_secs(10),
        },
    ));
    let app = App {
        engine,
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: Duration::from_secs(3),
        provider: None,
    };
    let base = serve(router(app)).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let path = "/accounts/mia/debits";
    let first = {
        let addr = addr.clone();
        tokio::spawn(async move { debit_and_read(&addr, path, "wait-1").await })
    };
    // Until the first debit holds its claim.
    idem_tests::until_claimed(&store, "the first debit").await;
    let before = idem_tests::alive_tasks();
    send_and_hang_up(
        &addr,
        path,
        "wait-1",
        Duration::from_millis(100),
        HangUp::Reset,
    )
    .await;
    // The server sees the hang-up and drops the duplicate's request.
    let alive = idem_tests::alive_tasks_after(before, Duration::from_millis(1500)).await;
    assert!(
        alive <= before,
        "{alive} tasks alive after the duplicate's client hung up, {before} before it came: \
         its wait went on for nobody"
    );
    let answer = first.await.expect("the first debit");
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}
