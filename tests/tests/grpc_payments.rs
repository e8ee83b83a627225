//! The gRPC payments service (`examples/grpc_payments`) over a real socket:
//! `idem_tonic::IdempotencyLayer` in front of the same ledger as the HTTP
//! example, on memory, Redis and PostgreSQL.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore, Policy, Store};
use idem_examples::grpc_payments::ledger_client::LedgerClient;
use idem_examples::grpc_payments::{serve, BalanceRequest, DebitRequest, Payments, Receipt};
use idem_examples::payments::{Ledger, LedgerError, MemoryLedger, PgLedger, RedisLedger};
use idem_examples::sqlite_ledger::SqliteLedger;
use idem_tests::{pg_store, redis_url, unique_prefix, DownStore, SlowBegin};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// Serves the payments service over `store` and `ledger`; returns a client.
async fn start(
    store: impl Store,
    ledger: Arc<dyn Ledger>,
    debit_delay: Duration,
) -> LedgerClient<Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let engine = Engine::new(store).with_policy(Policy::default().lease(Duration::from_secs(5)));
    tokio::spawn(serve(
        listener,
        engine,
        Payments {
            ledger,
            debit_delay,
        },
    ));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    LedgerClient::new(channel)
}

/// A Redis store under a prefix of its own (from `label`), and the ledger
/// whose balances sit beside its records.
async fn redis_records(label: &str) -> (idem_redis::RedisStore, Arc<dyn Ledger>) {
    let prefix = unique_prefix(label);
    let store = idem_redis::RedisStore::connect(&redis_url())
        .await
        .expect("redis")
        .with_prefix(&format!("{prefix}idem:"));
    let ledger = RedisLedger::connect(&redis_url(), &store, &format!("{prefix}balance:"))
        .await
        .expect("redis ledger");
    (store, Arc::new(ledger))
}

async fn on_memory(debit_delay: Duration) -> LedgerClient<Channel> {
    let store = MemoryStore::new();
    let ledger = Arc::new(MemoryLedger::new(&store));
    start(store, ledger, debit_delay).await
}

fn debit(account: &str, amount: u64, key: Option<&str>) -> Request<DebitRequest> {
    let mut request = Request::new(DebitRequest {
        account: account.to_owned(),
        amount,
    });
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("idempotency-key", key.parse().expect("metadata value"));
    }
    request
}

async fn balance(client: &mut LedgerClient<Channel>, account: &str) -> u64 {
    client
        .get_balance(BalanceRequest {
            account: account.to_owned(),
        })
        .await
        .expect("balance")
        .into_inner()
        .balance
}

fn problem(status: &Status) -> &str {
    status
        .metadata()
        .get("idem-problem")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn replayed<T>(response: &tonic::Response<T>) -> bool {
    response.metadata().get("idempotent-replayed").is_some()
}

/// The metadata of a response, without the per-connection ones and the
/// replay marker.
fn metadata<T>(response: &tonic::Response<T>) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<_> = response
        .metadata()
        .clone()
        .into_headers()
        .iter()
        .filter(|(n, _)| *n != "date" && *n != "idempotent-replayed")
        .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
        .collect();
    headers.sort();
    headers
}

/// Retries `request` while its first attempt still runs (`ABORTED`).
async fn retry_until_final(
    client: &mut LedgerClient<Channel>,
    account: &str,
    amount: u64,
    key: &str,
) -> Result<tonic::Response<Receipt>, Status> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match client.debit(debit(account, amount, Some(key))).await {
            Err(s) if s.code() == Code::Aborted && tokio::time::Instant::now() < deadline => {
                assert_eq!(problem(&s), "request-in-flight");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

#[tokio::test]
async fn a_client_that_compresses_with_gzip_is_debited_once_and_its_uncompressed_retry_replayed() {
    let plain = on_memory(Duration::ZERO).await;
    let mut gzip = plain
        .clone()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip)
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    let mut plain = plain;
    let first = gzip
        .debit(debit("gil", 100, Some("gz-1")))
        .await
        .expect("a gzip-compressed debit runs");
    assert!(!replayed(&first));
    let retry = gzip
        .debit(debit("gil", 100, Some("gz-1")))
        .await
        .expect("its compressed retry");
    assert!(replayed(&retry));
    assert_eq!(retry.get_ref(), first.get_ref());
    // A retry sent without compression (grpcio's fallback) is the same
    // request, and the recorded answer, sent uncompressed, reads the same.
    let fallback = plain
        .debit(debit("gil", 100, Some("gz-1")))
        .await
        .expect("its uncompressed retry");
    assert!(replayed(&fallback));
    assert_eq!(fallback.get_ref(), first.get_ref());
    // Another amount under the key is another request, compressed or not.
    let other = gzip.debit(debit("gil", 200, Some("gz-1"))).await;
    assert!(other.is_err(), "{other:?}");
    assert_eq!(balance(&mut plain, "gil").await, 9900);
}

#[tokio::test]
async fn a_retry_after_a_lost_answer_gets_the_same_receipt_and_one_debit() {
    let mut client = on_memory(Duration::ZERO).await;
    let first = client
        .debit(debit("alice", 1000, Some("debit-1")))
        .await
        .expect("debit");
    assert!(!replayed(&first));
    for _ in 0..3 {
        let again = client
            .debit(debit("alice", 1000, Some("debit-1")))
            .await
            .expect("replay");
        assert!(replayed(&again), "marked as a replay");
        assert_eq!(metadata(&again), metadata(&first), "the same metadata");
        assert_eq!(again.get_ref(), first.get_ref(), "the same receipt");
    }
    assert_eq!(first.get_ref().balance, 9000);
    assert_eq!(balance(&mut client, "alice").await, 9000, "debited once");
}

#[tokio::test]
async fn a_debit_retried_a_day_later_is_failed_precondition_and_not_charged_again() {
    let clock = Arc::new(idem_core::memory::ManualClock::new(1_700_000_000_000_000));
    let store = MemoryStore::builder().clock(Arc::clone(&clock)).build();
    let ledger = Arc::new(MemoryLedger::new(&store));
    let mut client = start(store, ledger, Duration::ZERO).await;
    client
        .debit(debit("alice", 1000, Some("late-1")))
        .await
        .expect("debit");
    // Records live a day (the default); the retry comes a minute after.
    clock.advance(Duration::from_hours(24) + Duration::from_mins(1));
    let late = client
        .debit(debit("alice", 1000, Some("late-1")))
        .await
        .expect_err("a late retry");
    assert_eq!(late.code(), Code::FailedPrecondition);
    assert_eq!(problem(&late), "key-expired");
    assert!(late.message().contains("expired"), "{}", late.message());
    assert_eq!(balance(&mut client, "alice").await, 9000, "debited once");
}

async fn thirty_two_concurrent_duplicates_debit_once(client: LedgerClient<Channel>) {
    let calls = (0..32).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.debit(debit("bob", 700, Some("dup-32"))).await })
    });
    let answers: Vec<_> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.expect("call task"))
        .collect();
    let receipts: Vec<&Receipt> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok())
        .map(tonic::Response::get_ref)
        .collect();
    for answer in &answers {
        if let Err(s) = answer {
            assert_eq!(s.code(), Code::Aborted, "{s:?}");
            assert_eq!(problem(s), "request-in-flight");
            assert!(idem_tonic::retry_delay(s).is_some(), "with retry info");
        }
    }
    let mut client = client.clone();
    let last = retry_until_final(&mut client, "bob", 700, "dup-32")
        .await
        .expect("final answer");
    for receipt in receipts {
        assert_eq!(receipt, last.get_ref(), "every receipt is the one debit's");
    }
    assert_eq!(balance(&mut client, "bob").await, 9300, "debited once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_duplicates_debit_once_on_memory() {
    thirty_two_concurrent_duplicates_debit_once(on_memory(Duration::from_millis(200)).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_duplicates_debit_once_on_redis() {
    let (store, ledger) = redis_records("grpc").await;
    let client = start(store, ledger, Duration::from_millis(200)).await;
    thirty_two_concurrent_duplicates_debit_once(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_duplicates_debit_once_on_mariadb() {
    let (store, ledger) = mariadb_records().await;
    let client = start(store, ledger, Duration::from_millis(200)).await;
    thirty_two_concurrent_duplicates_debit_once(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_duplicates_debit_once_on_postgres() {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    let client = start(store, Arc::new(ledger), Duration::from_millis(200)).await;
    thirty_two_concurrent_duplicates_debit_once(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_duplicates_debit_once_on_sqlite() {
    let store = idem_tests::sqlite_store().await;
    let ledger = SqliteLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    let client = start(store, Arc::new(ledger), Duration::from_millis(200)).await;
    thirty_two_concurrent_duplicates_debit_once(client).await;
}

#[tokio::test]
async fn the_same_key_with_another_amount_is_refused_and_debits_nothing_more() {
    let mut client = on_memory(Duration::ZERO).await;
    client
        .debit(debit("carol", 1000, Some("reuse-1")))
        .await
        .expect("debit");
    let refused = client
        .debit(debit("carol", 5000, Some("reuse-1")))
        .await
        .expect_err("another request under the key");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(problem(&refused), "key-reused");
    assert!(
        !refused.message().contains("dbt_"),
        "nothing of the first answer: {}",
        refused.message()
    );
    // The key is scoped by the account: on another account it is a new debit.
    let other = client
        .debit(debit("dave", 1000, Some("reuse-1")))
        .await
        .expect("another account");
    assert!(!replayed(&other));
    assert_eq!(balance(&mut client, "carol").await, 9000);
}

#[tokio::test]
async fn a_debit_without_a_valid_key_is_invalid_argument_and_debits_nothing() {
    let mut client = on_memory(Duration::ZERO).await;
    let missing = client
        .debit(debit("erin", 1000, None))
        .await
        .expect_err("no key");
    assert_eq!(missing.code(), Code::InvalidArgument);
    assert_eq!(problem(&missing), "key-missing");
    assert!(
        missing.message().contains("idempotency-key` metadata")
            && missing.message().contains("each new call"),
        "says where the key goes, in gRPC's words: {}",
        missing.message()
    );
    let long = "k".repeat(256);
    let malformed = client
        .debit(debit("erin", 1000, Some(&long)))
        .await
        .expect_err("a 256-character key");
    assert_eq!(malformed.code(), Code::InvalidArgument);
    assert_eq!(problem(&malformed), "key-malformed");
    assert_eq!(balance(&mut client, "erin").await, 10_000);
}

#[tokio::test]
async fn store_down_is_unavailable_with_retry_info_and_debits_nothing() {
    let ledger = Arc::new(MemoryLedger::new(&MemoryStore::new()));
    let mut client = start(DownStore, ledger.clone(), Duration::ZERO).await;
    let down = client
        .debit(debit("frank", 1000, Some("down-1")))
        .await
        .expect_err("store down");
    assert_eq!(down.code(), Code::Unavailable);
    assert_eq!(problem(&down), "store-unavailable");
    assert_eq!(idem_tonic::retry_delay(&down), Some(Duration::from_secs(1)));
    // gRFC A6's pushback, for gRPC's own retry policies.
    assert_eq!(
        down.metadata()
            .get(idem_tonic::RETRY_PUSHBACK_MS)
            .and_then(|v| v.to_str().ok()),
        Some("1000")
    );
    assert!(
        !down.message().contains("refused"),
        "internals stay in the logs"
    );
    assert_eq!(
        ledger.balance("frank").await.expect("balance"),
        10_000,
        "fail closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_deadline_passes_mid_debit_retries_and_is_debited_once() {
    deadline_passes_mid_debit(on_memory(Duration::from_millis(800)).await).await;
}

/// On PostgreSQL the abandoned debit's transaction is recorded and
/// committed by the layer after the caller has gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_deadline_passes_mid_debit_retries_and_is_debited_once_on_postgres() {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    deadline_passes_mid_debit(start(store, Arc::new(ledger), Duration::from_millis(800)).await)
        .await;
}

/// The same on MariaDB: `idem_tonic::commit_with_record` commits the debit
/// with its record in a `MySqlTransaction`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_deadline_passes_mid_debit_retries_and_is_debited_once_on_mariadb() {
    let (store, ledger) = mariadb_records().await;
    deadline_passes_mid_debit(start(store, ledger, Duration::from_millis(800)).await).await;
}

async fn mariadb_records() -> (
    idem_mysql::MySqlStore,
    Arc<dyn idem_examples::payments::Ledger>,
) {
    let store = idem_tests::mysql_store().await;
    let ledger = idem_examples::mysql_ledger::MySqlLedger::new(
        store.clone(),
        &format!("{}_accounts", store.table()),
    );
    ledger.migrate().await.expect("ledger migration");
    (store, Arc::new(ledger))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_deadline_passes_before_its_debit_starts_is_not_debited_and_its_retry_debits_once(
) {
    // The store takes 400 ms to answer a claim; the client's deadline is
    // 100 ms: it passes while the claim is being taken.
    let records = MemoryStore::new();
    let ledger = Arc::new(MemoryLedger::new(&records));
    let slow = SlowBegin::slow_begins(records, Duration::from_millis(400));
    let mut client = start(slow, ledger.clone(), Duration::ZERO).await;
    debit_past_its_deadline(
        &mut client,
        "ivan",
        "early-deadline-1",
        Duration::from_millis(100),
    )
    .await;
    // The retry waits while the first call's claim is held (ABORTED), then
    // runs: the first debit, not a replay, so the call that was over never
    // ran its method.
    let retried = retry_until_final(&mut client, "ivan", 1000, "early-deadline-1")
        .await
        .expect("the retry debits");
    assert!(
        !replayed(&retried),
        "the retry is the first debit, not a replay"
    );
    assert_eq!(retried.get_ref().balance, 9000);
    let again = client
        .debit(debit("ivan", 1000, Some("early-deadline-1")))
        .await
        .expect("replay");
    assert!(replayed(&again));
    assert_eq!(again.get_ref(), retried.get_ref());
    assert_eq!(balance(&mut client, "ivan").await, 9000, "debited once");
}

/// Debits 1000 from `account` under `key` with a deadline of `deadline`,
/// which passes before the answer.
async fn debit_past_its_deadline(
    client: &mut LedgerClient<Channel>,
    account: &str,
    key: &str,
    deadline: Duration,
) {
    let mut first = debit(account, 1000, Some(key));
    first.set_timeout(deadline);
    let cancelled = client.debit(first).await.expect_err("deadline");
    // tonic's client reports its own timeout as CANCELLED, a server-side
    // deadline as DEADLINE_EXCEEDED: whichever fires first.
    assert!(
        matches!(cancelled.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{cancelled:?}"
    );
}

async fn deadline_passes_mid_debit(mut client: LedgerClient<Channel>) {
    debit_past_its_deadline(
        &mut client,
        "grace",
        "deadline-1",
        Duration::from_millis(200),
    )
    .await;
    // The debit was not cancelled with the call: the retry waits for it
    // (ABORTED, in flight) and then gets its receipt, not a second debit.
    let receipt = retry_until_final(&mut client, "grace", 1000, "deadline-1")
        .await
        .expect("the first debit's receipt");
    assert!(replayed(&receipt));
    assert_eq!(receipt.get_ref().balance, 9000);
    assert_eq!(balance(&mut client, "grace").await, 9000, "debited once");
}

/// Runs `statement` (with `{records}` for the store's records table).
async fn on_records(store: &idem_postgres::PgStore, statement: &str) -> i64 {
    let sql = statement.replace("{records}", &format!("\"{}\".records", store.schema()));
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_optional(store.pool())
        .await
        .expect("records statement")
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_that_outlives_its_claim_leaves_no_debit_and_the_retry_debits_once_on_postgres() {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    let mut client = start(store.clone(), Arc::new(ledger), Duration::from_millis(1500)).await;
    let first = tokio::spawn({
        let mut client = client.clone();
        async move { client.debit(debit("heidi", 1000, Some("outlived-1"))).await }
    });
    // While the provider is slow, the claim passes to another holder (the
    // first holder's renewals were lost, say).
    let claimed = tokio::time::Instant::now() + Duration::from_secs(5);
    while on_records(&store, "SELECT count(*) FROM {records}").await == 0 {
        assert!(
            tokio::time::Instant::now() < claimed,
            "the debit never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    on_records(
        &store,
        "UPDATE {records} SET token = token + 1000 RETURNING 0::bigint",
    )
    .await;
    let lost = first
        .await
        .expect("first call")
        .expect_err("the claim was lost");
    // The debit went with its record: rolled back, not left behind for the
    // holder that took over to debit a second time.
    assert_eq!(
        balance(&mut client, "heidi").await,
        10_000,
        "the outlived debit is rolled back"
    );
    assert_eq!(lost.code(), Code::Aborted, "{lost:?}");
    assert_eq!(problem(&lost), "lease-lost");
    assert!(lost.message().contains("rolled back"), "{lost:?}");
    // That holder dies too; once its lease is over, the retry debits once
    // and the next retry replays it byte for byte.
    on_records(
        &store,
        "UPDATE {records} SET deadline = now() - interval '1 second' RETURNING 0::bigint",
    )
    .await;
    let receipt = retry_until_final(&mut client, "heidi", 1000, "outlived-1")
        .await
        .expect("the retry's receipt");
    assert!(!replayed(&receipt));
    assert_eq!(receipt.get_ref().balance, 9000);
    let replay = client
        .debit(debit("heidi", 1000, Some("outlived-1")))
        .await
        .expect("replay");
    assert!(replayed(&replay));
    assert_eq!(metadata(&replay), metadata(&receipt));
    assert_eq!(replay.get_ref(), receipt.get_ref());
    assert_eq!(balance(&mut client, "heidi").await, 9000, "debited once");
}

#[tokio::test]
async fn insufficient_funds_is_recorded_and_replayed() {
    let mut client = on_memory(Duration::ZERO).await;
    let first = client
        .debit(debit("heidi", 20_000, Some("big-1")))
        .await
        .expect_err("insufficient funds");
    assert_eq!(first.code(), Code::FailedPrecondition);
    let again = client
        .debit(debit("heidi", 20_000, Some("big-1")))
        .await
        .expect_err("replayed");
    assert_eq!(again.code(), Code::FailedPrecondition);
    assert_eq!(again.message(), first.message());
    assert!(again.metadata().get("idempotent-replayed").is_some());
}

/// A ledger whose first debit fails as an unreachable database would.
struct FailsOnce {
    inner: MemoryLedger,
    debits: AtomicUsize,
}

#[idem_core::store::async_trait]
impl Ledger for FailsOnce {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        self.inner.balance(account).await
    }
    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError> {
        if self.debits.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(LedgerError::Unavailable("connection refused".into()));
        }
        self.inner.debit(account, amount).await
    }
}

#[tokio::test]
async fn a_ledger_failure_is_not_recorded_so_the_retry_debits() {
    let mut client = start(
        MemoryStore::new(),
        Arc::new(FailsOnce {
            inner: MemoryLedger::new(&MemoryStore::new()),
            debits: AtomicUsize::new(0),
        }),
        Duration::ZERO,
    )
    .await;
    let failed = client
        .debit(debit("ivan", 1000, Some("flaky-1")))
        .await
        .expect_err("ledger down");
    assert_eq!(failed.code(), Code::Unavailable);
    assert_eq!(problem(&failed), "", "the ledger's status, not idem's");
    let retried = client
        .debit(debit("ivan", 1000, Some("flaky-1")))
        .await
        .expect("the retry runs again");
    assert!(!replayed(&retried));
    assert_eq!(balance(&mut client, "ivan").await, 9000);
}

/// An operator force-removes the record while its debit runs: the removed
/// call's debit is refused with its record (`ABORTED` `lease-lost`), and the
/// retry debits once. `store` is the engine's store, shared with `ledger`.
async fn force_removed_mid_debit_debits_once<S: Store + Clone>(store: S, ledger: Arc<dyn Ledger>) {
    let mut client = start(store.clone(), ledger, Duration::from_millis(600)).await;
    let first = tokio::spawn({
        let mut client = client.clone();
        async move { client.debit(debit("judy", 1000, Some("forced-1"))).await }
    });
    let id = idem_core::RecordId::new(
        &idem_core::Scope::new("judy"),
        &idem_core::IdempotencyKey::parse("forced-1").expect("key"),
    );
    // Until the first debit holds its claim.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.inspect(&id).await.expect("inspect").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first debit never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let removed = store.remove(&id, true).await.expect("remove");
    assert_eq!(removed, idem_core::Removal::Removed);
    let receipt = retry_until_final(&mut client, "judy", 1000, "forced-1")
        .await
        .expect("the retry's receipt");
    assert!(!replayed(&receipt));
    let lost = first
        .await
        .expect("first call")
        .expect_err("the removed call's claim was lost");
    assert_eq!(lost.code(), Code::Aborted, "{lost:?}");
    assert_eq!(problem(&lost), "lease-lost");
    assert_eq!(balance(&mut client, "judy").await, 9000, "debited once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_force_removed_mid_way_debits_once_on_memory() {
    let store = MemoryStore::new();
    let ledger = Arc::new(MemoryLedger::new(&store));
    force_removed_mid_debit_debits_once(store, ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_force_removed_mid_way_debits_once_on_redis() {
    let (store, ledger) = redis_records("grpc-forced").await;
    force_removed_mid_debit_debits_once(store, ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_force_removed_mid_way_debits_once_on_postgres() {
    let store = pg_store().await;
    let ledger = PgLedger::new(store.clone());
    ledger.migrate().await.expect("ledger migration");
    force_removed_mid_debit_debits_once(store, Arc::new(ledger)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_whose_deadline_passes_while_it_waits_for_the_first_leaves_nothing_running() {
    // The first debit takes 3 s; its retry waits for it (the policy waits
    // up to 10 s) under a 200 ms deadline. Nothing has run for the retry,
    // so nothing of it may outlive its deadline: no task waiting on.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let store = MemoryStore::new();
    let engine = Engine::new(store.clone()).with_policy(Policy::default().on_in_flight(
        idem_core::OnInFlight::Wait {
            max: Duration::from_secs(10),
        },
    ));
    tokio::spawn(serve(
        listener,
        engine,
        Payments {
            ledger: Arc::new(MemoryLedger::new(&store)),
            debit_delay: Duration::from_secs(3),
        },
    ));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    let first = {
        let mut client = LedgerClient::new(channel.clone());
        tokio::spawn(async move { client.debit(debit("nia", 1, Some("wait-grpc-1"))).await })
    };
    // Until the first debit holds its claim.
    idem_tests::until_claimed(&store, "the first debit").await;
    let before = idem_tests::alive_tasks();
    let mut retry = debit("nia", 1, Some("wait-grpc-1"));
    retry.set_timeout(Duration::from_millis(200));
    let status = LedgerClient::new(channel.clone())
        .debit(retry)
        .await
        .expect_err("the retry's deadline passes while the first runs");
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    let alive = idem_tests::alive_tasks_after(before, Duration::from_millis(1500)).await;
    assert!(
        alive <= before,
        "{alive} tasks alive after the retry's deadline, {before} before it came: \
         its wait went on for nobody"
    );
    let receipt = first
        .await
        .expect("the first debit's task")
        .expect("the first debit");
    assert_eq!(receipt.into_inner().amount, 1);
}

#[tokio::test]
async fn a_service_with_its_own_error_model_answers_idem_s_refusals_in_it() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let store = MemoryStore::new();
    let payments = Payments {
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: Duration::ZERO,
    };
    let render = |problem: &idem_tonic::Problem| {
        Status::new(
            Code::Aborted,
            format!("payments/{}: {}", problem.kind().slug(), problem.detail()),
        )
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(idem_tonic::problem_format(render))
            .layer(idem_examples::grpc_payments::idempotency(Engine::new(
                store,
            )))
            .add_service(idem_examples::grpc_payments::ledger_server::LedgerServer::new(payments))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    let mut client = LedgerClient::new(channel);

    let missing = client
        .debit(debit("frank", 1000, None))
        .await
        .expect_err("no key");
    assert_eq!(missing.code(), Code::Aborted);
    assert!(
        missing.message().starts_with("payments/key-missing: "),
        "{}",
        missing.message()
    );
    client
        .debit(debit("frank", 1000, Some("fr-1")))
        .await
        .expect("the first debit");
    let reused = client
        .debit(debit("frank", 2000, Some("fr-1")))
        .await
        .expect_err("another amount");
    assert!(
        reused.message().starts_with("payments/key-reused: "),
        "{}",
        reused.message()
    );
    // The service's own errors are its own, untouched.
    let own = client
        .debit(debit("frank", 0, Some("fr-2")))
        .await
        .expect_err("a zero amount");
    assert_eq!(own.code(), Code::InvalidArgument);
    assert_eq!(balance(&mut client, "frank").await, 9000);
}
