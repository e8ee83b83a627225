//! The caller's half for gRPC: `idem-client`'s tower layer under a tonic
//! client, against the gRPC payments example behind `idem_tonic`.

use std::sync::Arc;
use std::time::Duration;

use idem_client::{CallReport, GrpcIdempotencyLayer, RetryPolicy};
use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::grpc_payments::ledger_client::LedgerClient;
use idem_examples::grpc_payments::{serve, BalanceRequest, DebitRequest, Payments};
use idem_examples::payments::MemoryLedger;
use idem_tests::fault_proxy::Fault;
use tonic::transport::Channel;
use tonic::Code;

type Client = LedgerClient<idem_client::GrpcIdempotency<Channel>>;

/// The service with debits that take `delay`, and a client with the layer.
async fn start(delay: Duration) -> Client {
    start_with(delay, GrpcIdempotencyLayer::new()).await
}

/// The same, the client's layer `layer` (its policy set here).
async fn start_with(delay: Duration, layer: GrpcIdempotencyLayer) -> Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let store = MemoryStore::new();
    let engine =
        Engine::new(store.clone()).with_policy(Policy::default().lease(Duration::from_secs(5)));
    tokio::spawn(serve(
        listener,
        engine,
        Payments {
            ledger: Arc::new(MemoryLedger::new(&store)),
            debit_delay: delay,
        },
    ));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    let policy = RetryPolicy::default()
        .max_attempts(10)
        .backoff(Duration::from_millis(20), Duration::from_millis(200));
    let layered = tower::ServiceBuilder::new()
        .layer(layer.policy(policy))
        .service(channel);
    LedgerClient::new(layered)
}

async fn balance(client: &mut Client, account: &str) -> u64 {
    client
        .get_balance(BalanceRequest {
            account: account.to_owned(),
        })
        .await
        .expect("balance")
        .into_inner()
        .balance
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_outlives_its_deadline_is_retried_with_its_key_and_gets_the_one_debit() {
    let mut client = start(Duration::from_millis(500)).await;
    let before = balance(&mut client, "hana").await;
    let mut call = tonic::Request::new(DebitRequest {
        account: "hana".to_owned(),
        amount: 300,
    });
    // Each attempt's deadline passes before the debit ends: the first
    // attempt gets DEADLINE_EXCEEDED (or the client's own CANCELLED), the
    // next ones ABORTED while the debit runs, then its receipt.
    call.set_timeout(Duration::from_millis(150));
    let receipt = client.debit(call).await.expect("the debit's receipt");
    let how = receipt
        .extensions()
        .get::<CallReport>()
        .cloned()
        .expect("the layer's report");
    assert!(how.attempts >= 2, "{how:?}");
    assert!(how.replayed, "the receipt is the first attempt's: {how:?}");
    assert_eq!(
        before - balance(&mut client, "hana").await,
        300,
        "debited once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_reused_for_another_debit_is_refused_once_and_not_retried() {
    let mut client = start(Duration::ZERO).await;
    let call = |amount| {
        let mut call = tonic::Request::new(DebitRequest {
            account: "ivo".to_owned(),
            amount,
        });
        call.metadata_mut()
            .insert("idempotency-key", "grpc-order-1".parse().expect("metadata"));
        call
    };
    let first = client.debit(call(10)).await.expect("first");
    assert_eq!(
        first
            .extensions()
            .get::<CallReport>()
            .map(|i| i.key.as_str()),
        Some("grpc-order-1")
    );
    let reused = client.debit(call(20)).await.expect_err("key reused");
    assert_eq!(reused.code(), Code::FailedPrecondition);
}

/// An order's payment, made by an `Engine::run` operation through the
/// layer: whether the debit's key came from the claim, and whether the
/// debit was a replay.
async fn pay_for_order(
    engine: &Engine,
    client: &Client,
    stall: Duration,
) -> Result<idem_core::Ran<(bool, bool)>, idem_core::Error<idem_core::Never>> {
    let call = idem_core::Call::new(
        idem_core::Scope::new("orders"),
        idem_core::IdempotencyKey::parse("grpc-order-9").expect("key"),
        idem_core::Fingerprint::of("pay", &9).expect("fingerprint"),
    );
    engine
        .run(&call, |_claim| async move {
            let answer = client
                .clone()
                .debit(DebitRequest {
                    account: "jo".to_owned(),
                    amount: 9,
                })
                .await
                .expect("downstream debit");
            let how = answer
                .extensions()
                .get::<CallReport>()
                .cloned()
                .expect("report");
            // Frozen here, past the lease: another instance takes over.
            tokio::time::sleep(stall).await;
            Ok::<_, idem_core::Never>((how.derived, how.replayed))
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_after_its_grpc_debit_and_taken_over_debits_once() {
    let client = start_with(Duration::ZERO, GrpcIdempotencyLayer::new().propagate(true)).await;
    let before = balance(&mut client.clone(), "jo").await;
    let lease = Duration::from_millis(300);
    let records: Arc<dyn idem_core::Store> = Arc::new(MemoryStore::new());
    let policy = Policy::default().lease(lease);
    let stalling = Engine::from_arc(Arc::new(idem_tests::RenewalsFail::renewals_fail(
        Arc::clone(&records),
    )))
    .with_policy(policy);
    let other = Engine::from_arc(Arc::clone(&records)).with_policy(policy);
    let first = {
        let client = client.clone();
        tokio::spawn(async move { pay_for_order(&stalling, &client, lease * 4).await })
    };
    let order = idem_core::RecordId::new(
        &idem_core::Scope::new("orders"),
        &idem_core::IdempotencyKey::parse("grpc-order-9").expect("key"),
    );
    idem_tests::until_lease_lapsed(&*records, &order, "the frozen holder").await;
    let second = pay_for_order(&other, &client, Duration::ZERO)
        .await
        .expect("the takeover runs the order");
    let first = first.await.expect("first holder");
    assert_eq!(
        before - balance(&mut client.clone(), "jo").await,
        9,
        "one downstream debit, though the order ran twice"
    );
    assert_eq!(
        second,
        idem_core::Ran::Executed((true, true)),
        "derived key, replayed debit"
    );
    assert!(matches!(first, Err(idem_core::Error::LeaseLost)));
}

/// The service on memory behind a fault proxy with `plan`, and a client
/// straight to the service (no faults) to read balances with.
async fn behind_faults(plan: Vec<Fault>) -> (idem_tests::fault_proxy::FaultProxy, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let store = MemoryStore::new();
    tokio::spawn(serve(
        listener,
        Engine::new(store.clone()),
        Payments {
            ledger: Arc::new(MemoryLedger::new(&store)),
            debit_delay: Duration::ZERO,
        },
    ));
    let proxy = idem_tests::fault_proxy::FaultProxy::start(addr, plan).await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    let direct = LedgerClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcIdempotencyLayer::new())
            .service(channel),
    );
    (proxy, direct)
}

/// Debits `account` by 1 through the proxy, on a connection of its own (so
/// that the proxy's faults fall on calls: a failed attempt's retry connects
/// again), with up to `attempts` attempts; the layer's report.
async fn debit_through(
    proxy: &idem_tests::fault_proxy::FaultProxy,
    account: &str,
    attempts: u32,
) -> CallReport {
    let channel = Channel::from_shared(proxy.url())
        .expect("address")
        .connect_lazy();
    let layer = GrpcIdempotencyLayer::new().policy(
        RetryPolicy::default()
            .max_attempts(attempts)
            .backoff(Duration::from_millis(1), Duration::from_millis(20)),
    );
    let mut client = LedgerClient::new(tower::ServiceBuilder::new().layer(layer).service(channel));
    let receipt = client
        .debit(DebitRequest {
            account: account.to_owned(),
            amount: 1,
        })
        .await
        .unwrap_or_else(|e| panic!("a debit of {account} failed after its retries: {e:?}"));
    receipt
        .extensions()
        .get::<CallReport>()
        .cloned()
        .expect("the layer's report")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debits_over_connections_reset_refused_and_delayed_each_happen_once() {
    let (proxy, mut direct) = behind_faults(vec![
        Fault::Reset,
        Fault::Pass,
        Fault::Refuse,
        Fault::Delay(Duration::from_millis(20)),
        Fault::Reset,
        Fault::Refuse,
    ])
    .await;
    let before = balance(&mut direct, "kai").await;
    let mut retried = 0;
    for _ in 0..100u64 {
        // A reset or refused connection fails the attempt.
        if debit_through(&proxy, "kai", 20).await.attempts > 1 {
            retried += 1;
        }
    }
    let after = balance(&mut direct, "kai").await;
    assert_eq!(before - after, 100, "each debit once");
    assert!(
        retried >= 10,
        "only {retried} debits were retried: {:?}",
        proxy.counts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_whose_answer_the_network_drops_is_retried_and_answered_with_its_receipt() {
    const DEBITS: u64 = 20;
    // Every call's first connection carries the debit to the server and
    // loses its answer (the proxy reads HTTP/2's frames and closes when the
    // server's header block for the call comes); the retry's connection
    // passes.
    let (proxy, mut direct) = behind_faults(vec![Fault::DropAnswer, Fault::Pass]).await;
    let before = balance(&mut direct, "lea").await;
    for i in 0..DEBITS {
        let how = debit_through(&proxy, "lea", 5).await;
        assert_eq!(
            how.attempts, 2,
            "debit {i}: the lost answer, then its retry"
        );
        assert!(
            how.replayed,
            "debit {i}: the retry is answered with the first receipt"
        );
    }
    assert_eq!(
        before - balance(&mut direct, "lea").await,
        DEBITS,
        "each debit once, though each was sent twice: {:?}",
        proxy.counts()
    );
}

/// Every answer lost over gRPC: the status keeps its code, and its source
/// tells the key, the attempts and that the debit may have run; the same
/// key later gets the recorded receipt.
#[tokio::test]
async fn a_grpc_debit_whose_every_answer_is_lost_reports_its_key_and_resumes_once() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let store = MemoryStore::new();
    tokio::spawn(serve(
        listener,
        Engine::new(store.clone()),
        Payments {
            ledger: Arc::new(MemoryLedger::new(&store)),
            debit_delay: Duration::ZERO,
        },
    ));
    let proxy = idem_tests::fault_proxy::FaultProxy::start(addr, vec![Fault::DropAnswer]).await;
    let policy = RetryPolicy::default()
        .max_attempts(3)
        .backoff(Duration::from_millis(2), Duration::from_millis(10));
    let lossy = Channel::from_shared(proxy.url())
        .expect("address")
        .connect_lazy();
    let mut lossy = LedgerClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcIdempotencyLayer::new().policy(policy))
            .service(lossy),
    );
    let debit = DebitRequest {
        account: "grace".to_owned(),
        amount: 7,
    };
    let lost = lossy
        .debit(debit.clone())
        .await
        .expect_err("every answer is lost");
    let failed =
        idem_client::CallFailed::in_status(&lost).expect("the layer's report on the status");
    assert_eq!(failed.attempts, 3, "{lost:?}");
    assert!(failed.may_have_run, "{lost:?}");

    let direct = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .expect("connect");
    let mut direct = LedgerClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcIdempotencyLayer::new().policy(policy))
            .service(direct),
    );
    let mut resumed = tonic::Request::new(debit);
    resumed.metadata_mut().insert(
        "idempotency-key",
        failed.key.parse().expect("a metadata value"),
    );
    let receipt = direct.debit(resumed).await.expect("answered");
    let how = receipt
        .extensions()
        .get::<CallReport>()
        .cloned()
        .expect("the report");
    assert!(
        how.replayed,
        "the debit that ran is replayed, not run again"
    );
    assert_eq!(balance(&mut direct, "grace").await, 10_000 - 7);
}
