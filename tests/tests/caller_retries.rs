//! The caller's half end to end: `idem-client`'s middleware in front of the
//! payments example, through a proxy that loses answers, resets and refuses
//! connections and delays them. Every logical debit takes effect exactly
//! once, the client's answer is the recorded one, and retries stop where
//! they must.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use futures_util::StreamExt as _;
use idem_client::{
    CallFailed, CallSite, IdempotentRetries, Key, ProblemKind, ResponseExt, RetryPolicy,
};
use idem_core::{Engine, MemoryStore};
use idem_tests::fault_proxy::{Fault, FaultProxy};
use idem_tests::{payments_on_memory, serve, Payments};
use reqwest_middleware::ClientWithMiddleware;

const ACCOUNTS: usize = 5;
const CALLS: usize = 200;

/// The proxy's plan: half the connections fail, a quarter of them after
/// the request reached the server.
fn faults() -> Vec<Fault> {
    vec![
        Fault::DropAnswer,
        Fault::Pass,
        Fault::Reset,
        Fault::Refuse,
        Fault::Pass,
        Fault::DropAnswer,
        Fault::Delay(Duration::from_millis(30)),
        Fault::Pass,
    ]
}

/// Half the connections fail: 40 attempts make a call that fails them all
/// (one in 2^40) out of the question.
fn through_faults() -> RetryPolicy {
    RetryPolicy::default()
        .max_attempts(40)
        .backoff(Duration::from_millis(2), Duration::from_millis(40))
}

/// A client that opens a connection per attempt (so that each fault of the
/// proxy falls on one attempt), with the middleware.
fn client(policy: RetryPolicy) -> ClientWithMiddleware {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    reqwest_middleware::ClientBuilder::new(http)
        .with(IdempotentRetries::new().policy(policy))
        .build()
}

#[tokio::test]
async fn answers_lost_connections_reset_and_refused_still_debit_every_payment_exactly_once() {
    let url = payments_on_memory(MemoryStore::new()).await;
    let target = url.trim_start_matches("http://").parse().expect("address");
    let proxy = FaultProxy::start(target, faults()).await;
    let client = client(through_faults());
    let mut before = HashMap::new();
    for a in 0..ACCOUNTS {
        let account = format!("acct-{a}");
        before.insert(
            account.clone(),
            Payments::new(url.as_str()).balance(&account).await,
        );
    }

    let answers: Vec<(String, String, u32, bool, Vec<u8>)> = futures_util::stream::iter(0..CALLS)
        .map(|i| {
            let (client, proxy) = (client.clone(), proxy.url());
            async move {
                let account = format!("acct-{}", i % ACCOUNTS);
                let answer = client
                    .post(format!("{proxy}/accounts/{account}/debits"))
                    .json(&serde_json::json!({ "amount": 1 }))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("call {i} failed after its retries: {e}"));
                let how = answer
                    .call_report()
                    .cloned()
                    .expect("the middleware's report");
                assert_eq!(answer.status(), StatusCode::CREATED, "call {i}");
                let body = answer.bytes().await.expect("body").to_vec();
                (account, how.key, how.attempts, how.replayed, body)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;

    // Each payment once: every account is down by exactly its calls.
    for a in 0..ACCOUNTS {
        let account = format!("acct-{a}");
        let calls = u64::try_from(CALLS / ACCOUNTS).expect("small");
        assert_eq!(
            before[&account] - Payments::new(url.as_str()).balance(&account).await,
            calls,
            "{account} was debited other than once per payment"
        );
    }
    // Keys: one per logical call.
    let keys: std::collections::HashSet<_> = answers.iter().map(|a| &a.1).collect();
    assert_eq!(keys.len(), CALLS);
    // The client's answer is the recorded one, byte for byte.
    let direct = reqwest::Client::new();
    for (account, key, _, _, body) in &answers {
        let replay = direct
            .post(format!("{url}/accounts/{account}/debits"))
            .header("idempotency-key", key)
            .json(&serde_json::json!({ "amount": 1 }))
            .send()
            .await
            .expect("replay");
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
        assert_eq!(&replay.bytes().await.expect("body")[..], &body[..]);
    }
    // The faults fell on attempts, and answers lost after the debit came
    // back as replays.
    let retried = answers.iter().filter(|a| a.2 > 1).count();
    let replayed = answers.iter().filter(|a| a.3).count();
    assert!(
        retried > CALLS / 4,
        "only {retried} calls were retried: {:?}",
        proxy.counts()
    );
    assert!(
        replayed > CALLS / 10,
        "only {replayed} answers were replays"
    );
}

#[tokio::test]
async fn a_key_reused_for_another_payment_is_refused_once_and_never_retried() {
    let url = payments_on_memory(MemoryStore::new()).await;
    let client = client(RetryPolicy::default());
    let key = format!("order-{}", std::process::id());
    // A debit of `amount` under the one key.
    let debit = |amount: u64| {
        client
            .post(format!("{url}/accounts/acct-1/debits"))
            .with_extension(Key::new(&key))
            .json(&serde_json::json!({ "amount": amount }))
            .send()
    };
    let first = debit(5).await.expect("first");
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(
        first.call_report().map(|i| i.key.as_str()),
        Some(key.as_str())
    );
    let other = debit(7).await.expect("second");
    assert_eq!(other.call_report().map(|i| i.attempts), Some(1));
    let problem = other.error_for_problem().await.expect_err("422");
    assert_eq!(
        (problem.status, problem.kind),
        (422, Some(ProblemKind::KeyReused))
    );
    assert!(!problem.is_retryable());
    let bad = client
        .post(format!("{url}/accounts/acct-1/debits"))
        .json(&serde_json::json!({ "amount": 0 }))
        .send()
        .await
        .expect("bad amount");
    assert_eq!(bad.call_report().map(|i| i.attempts), Some(1));
    assert!(bad.status().is_client_error());
}

/// Keys seen by a server that answers 503 to the first attempts of each.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

async fn flaky(State(seen): State<Seen>, headers: HeaderMap) -> StatusCode {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut seen = seen.0.lock().unwrap_or_else(PoisonError::into_inner);
    let earlier = seen.iter().filter(|k| **k == key).count();
    seen.push(key);
    if earlier < 2 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::CREATED
    }
}

#[tokio::test]
async fn every_attempt_of_a_call_carries_its_key_and_each_call_gets_a_new_one() {
    let seen = Seen::default();
    let url = serve(
        axum::Router::new()
            .route("/orders", post(flaky))
            .with_state(seen.clone()),
    )
    .await;
    let client =
        client(RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(5)));
    for _ in 0..2 {
        let answer = client
            .post(format!("{url}/orders"))
            .body("{}")
            .send()
            .await
            .expect("order");
        assert_eq!(answer.status(), StatusCode::CREATED);
        assert_eq!(answer.call_report().map(|i| i.attempts), Some(3));
    }
    let seen = seen
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(seen.len(), 6);
    assert!(seen[..3].iter().all(|k| *k == seen[0]) && !seen[0].is_empty());
    assert!(seen[3..].iter().all(|k| *k == seen[3]));
    assert_ne!(seen[0], seen[3], "a new logical call must get a new key");
}

/// An order's payment, made by an `Engine::run` operation through the
/// client: the downstream debit's key is derived from the order's claim.
async fn pay_for_order(
    engine: &Engine,
    client: &ClientWithMiddleware,
    downstream: &str,
    stall: Duration,
) -> Result<idem_core::Ran<Option<(bool, bool)>>, idem_core::Error<idem_core::Never>> {
    let call = idem_core::Call::new(
        idem_core::Scope::new("orders"),
        idem_core::IdempotencyKey::parse("order-77").expect("key"),
        idem_core::Fingerprint::of("pay", &77).expect("fingerprint"),
    );
    engine
        .run(&call, |_claim| async move {
            let answer = client
                .post(format!("{downstream}/accounts/acct-9/debits"))
                .with_extension(CallSite::new("debit"))
                .json(&serde_json::json!({ "amount": 77 }))
                .send()
                .await
                .expect("downstream debit");
            assert_eq!(answer.status(), StatusCode::CREATED);
            // Whether its key came from the claim, and whether it was a replay.
            let how = answer.call_report().map(|i| (i.derived, i.replayed));
            // Frozen here, past the lease: another instance takes over.
            tokio::time::sleep(stall).await;
            Ok::<_, idem_core::Never>(how)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_after_its_downstream_debit_and_taken_over_debits_downstream_once() {
    let downstream = payments_on_memory(MemoryStore::new()).await;
    let before = Payments::new(downstream.as_str()).balance("acct-9").await;
    let lease = Duration::from_millis(300);
    let records: Arc<dyn idem_core::Store> = Arc::new(MemoryStore::new());
    let policy = idem_core::Policy::default().lease(lease);
    let stalling = Engine::from_arc(Arc::new(idem_tests::RenewalsFail::renewals_fail(
        Arc::clone(&records),
    )))
    .with_policy(policy);
    let other = Engine::from_arc(Arc::clone(&records)).with_policy(policy);
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(IdempotentRetries::new().propagate(true))
        .build();

    let first = {
        let (client, downstream) = (client.clone(), downstream.clone());
        tokio::spawn(async move { pay_for_order(&stalling, &client, &downstream, lease * 4).await })
    };
    let order = idem_core::RecordId::new(
        &idem_core::Scope::new("orders"),
        &idem_core::IdempotencyKey::parse("order-77").expect("key"),
    );
    idem_tests::until_lease_lapsed(&*records, &order, "the frozen holder").await;
    let second = pay_for_order(&other, &client, &downstream, Duration::ZERO)
        .await
        .expect("the takeover runs the order");
    let first = first.await.expect("first holder");
    assert_eq!(
        before - Payments::new(downstream.as_str()).balance("acct-9").await,
        77,
        "one downstream debit, though the order ran twice"
    );
    let idem_core::Ran::Executed(Some((derived, replayed))) = second else {
        panic!("the takeover must run the operation again: {second:?}");
    };
    assert!(derived, "the downstream key comes from the order's claim");
    assert!(
        replayed,
        "the downstream service answers the repeated debit with its record"
    );
    assert!(
        matches!(first, Err(idem_core::Error::LeaseLost)),
        "the frozen holder's result is not recorded"
    );
}

/// How many times an actix-web handler ran for each key.
#[derive(Clone, Default)]
struct RunsPerKey(Arc<Mutex<HashMap<String, usize>>>);

async fn order(
    runs: actix_web::web::Data<RunsPerKey>,
    req: actix_web::HttpRequest,
    body: actix_web::web::Bytes,
) -> actix_web::HttpResponse {
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut runs = runs.0.lock().unwrap_or_else(PoisonError::into_inner);
    let n = runs.entry(key.clone()).or_default();
    *n += 1;
    actix_web::HttpResponse::Created().body(format!("order {key} run {n}: {}", body.len()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_to_actix_web_through_lost_answers_and_resets_run_exactly_once() {
    let runs = RunsPerKey::default();
    // actix-web builds the app once per worker: one store for all.
    let store = MemoryStore::new();
    let app_runs = runs.clone();
    let url = idem_tests::serve_actix(move || {
        actix_web::App::new()
            .app_data(actix_web::web::Data::new(app_runs.clone()))
            .wrap(idem_actix::Idempotency::new(Engine::new(store.clone())))
            .route("/orders", actix_web::web::post().to(order))
    });
    let proxy = FaultProxy::start(
        url.trim_start_matches("http://").parse().expect("address"),
        faults(),
    )
    .await;
    let client = client(through_faults());
    let answers: Vec<(String, u32, Vec<u8>)> = futures_util::stream::iter(0..CALLS)
        .map(|i| {
            let (client, proxy) = (client.clone(), proxy.url());
            async move {
                let answer = client
                    .post(format!("{proxy}/orders"))
                    .body(format!("order {i}"))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("order {i} failed after its retries: {e}"));
                assert_eq!(answer.status(), StatusCode::CREATED, "order {i}");
                let how = answer.call_report().cloned().expect("report");
                (
                    how.key,
                    how.attempts,
                    answer.bytes().await.expect("body").to_vec(),
                )
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let runs = runs
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(runs.len(), CALLS, "one key per order");
    assert!(
        runs.values().all(|n| *n == 1),
        "an order ran twice: {runs:?}"
    );
    for (key, _, body) in &answers {
        let expected = format!("order {key} run 1: ");
        assert!(
            body.starts_with(expected.as_bytes()),
            "{key}: the answer is its record"
        );
    }
    let retried = answers.iter().filter(|a| a.1 > 1).count();
    assert!(
        retried > CALLS / 4,
        "only {retried} orders were retried: {:?}",
        proxy.counts()
    );
}

/// What a canned server answers each attempt with, in turn.
#[derive(Clone, Debug)]
enum Canned {
    Status(u16),
    NoAnswer,
}

/// A middleware in place of the network: answers attempts from a script
/// and records the key each carried.
struct Script {
    answers: Mutex<std::collections::VecDeque<Canned>>,
    keys: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for Script {
    async fn handle(
        &self,
        req: reqwest::Request,
        _: &mut http::Extensions,
        _: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let key = req
            .headers()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(key);
        let next = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or(Canned::Status(201));
        match next {
            Canned::Status(status) => Ok(reqwest::Response::from(
                http::Response::builder()
                    .status(status)
                    .body("")
                    .expect("response"),
            )),
            // A connection refused on a closed local port: a real
            // transport error, as reqwest reports it.
            Canned::NoAnswer => Err(reqwest_middleware::Error::Reqwest(
                reqwest::Client::new()
                    .post("http://127.0.0.1:9/")
                    .send()
                    .await
                    .expect_err("port 9 is closed"),
            )),
        }
    }
}

fn canned() -> impl proptest::strategy::Strategy<Value = Canned> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Canned::NoAnswer),
        prop::sample::select(vec![200u16, 201, 400, 404, 409, 422, 429, 500, 502, 503])
            .prop_map(Canned::Status),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Any run of answers: every attempt of a logical call carries the same
    /// key, calls never share one, no call makes more attempts than the
    /// maximum, and none is retried after a 4xx other than 409 and 429.
    #[test]
    fn every_attempt_carries_its_calls_key_and_no_call_exceeds_its_attempts(
        max in 1u32..6,
        calls in proptest::collection::vec(proptest::collection::vec(canned(), 0..8), 1..4),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let keys = Arc::new(Mutex::new(Vec::new()));
        let mut seen_keys = std::collections::HashSet::new();
        for script in calls {
            keys.lock().unwrap_or_else(PoisonError::into_inner).clear();
            let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
                .with(IdempotentRetries::new().policy(
                    RetryPolicy::default()
                        .max_attempts(max)
                        .backoff(Duration::from_micros(1), Duration::from_micros(10))
                        .max_retry_after(Duration::ZERO)
                        .in_flight(Duration::ZERO, max),
                ))
                .with(Script { answers: Mutex::new(script.clone().into()), keys: Arc::clone(&keys) })
                .build();
            let result = rt.block_on(client.post("http://idem.test/orders").body("{}").send());
            let sent = keys.lock().unwrap_or_else(PoisonError::into_inner).clone();
            proptest::prop_assert!(!sent.is_empty() && sent.len() <= max as usize, "{} attempts", sent.len());
            proptest::prop_assert!(sent.iter().all(|k| *k == sent[0] && !k.is_empty()));
            proptest::prop_assert!(seen_keys.insert(sent[0].clone()), "two calls shared a key");
            // No retry after a final answer.
            for (i, answer) in script.iter().take(sent.len() - 1).enumerate() {
                if let Canned::Status(s) = answer {
                    proptest::prop_assert!(
                        matches!(s, 409 | 429 | 500..=599),
                        "attempt {} answered {} and was retried", i + 1, s
                    );
                }
            }
            if let Ok(answer) = result {
                proptest::prop_assert_eq!(answer.call_report().map(|i| i.attempts as usize), Some(sent.len()));
            }
        }
    }
}

/// A server that marks its replays `Idempotency-Replayed` (a third-party
/// middleware's setting), and a 409 without `Retry-After`.
#[tokio::test]
async fn a_server_that_names_its_replay_header_otherwise_is_understood_when_told() {
    let router = axum::Router::new()
        .route(
            "/charges",
            post(|| async {
                (
                    StatusCode::CREATED,
                    [("idempotency-replayed", "true")],
                    "{}",
                )
            }),
        )
        .route(
            "/busy",
            post(|| async {
                (
                    StatusCode::CONFLICT,
                    [("content-type", "application/problem+json")],
                    r#"{"title":"in progress"}"#,
                )
            }),
        );
    let url = serve(router).await;
    let client = |mw: IdempotentRetries| {
        reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(mw)
            .build()
    };
    let told = client(IdempotentRetries::new().replay_header(
        reqwest::header::HeaderName::from_static("idempotency-replayed"),
    ));
    let answer = told
        .post(format!("{url}/charges"))
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.call_report().map(|i| i.replayed), Some(true));
    let untold = client(IdempotentRetries::new());
    let answer = untold
        .post(format!("{url}/charges"))
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.call_report().map(|i| i.replayed), Some(false));
    // The 409 without Retry-After, after the policy's attempts: the caller
    // is told it may retry, as the policy did.
    let busy = client(IdempotentRetries::new().policy(RetryPolicy::default().max_attempts(2)))
        .post(format!("{url}/busy"))
        .send()
        .await
        .expect("answer");
    let problem = busy.error_for_problem().await.expect_err("409");
    assert_eq!(problem.status, 409);
    assert!(
        problem.is_retryable(),
        "a 409 in flight, without Retry-After, is retryable"
    );
}

/// A server of another make (a third-party middleware): a duplicate of a
/// request still running is answered 409 without `Retry-After` until the
/// work finishes, 2.5 s after the first attempt. The caller keeps asking,
/// no sooner than a second apart, and gets the result, instead of giving
/// up after five quick 409s while the work still runs.
#[tokio::test]
async fn a_409_without_retry_after_is_asked_again_until_the_work_is_done() {
    let first_seen: Arc<Mutex<HashMap<String, std::time::Instant>>> = Arc::default();
    let router = axum::Router::new()
        .route(
            "/orders",
            post(
                |State(seen): State<Arc<Mutex<HashMap<String, std::time::Instant>>>>,
                 headers: HeaderMap| async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let started = *seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(key)
                        .or_insert_with(std::time::Instant::now);
                    if started.elapsed() < Duration::from_millis(2500) {
                        (StatusCode::CONFLICT, r#"{"detail":"in progress"}"#)
                    } else {
                        (StatusCode::CREATED, r#"{"order":"done"}"#)
                    }
                },
            ),
        )
        .with_state(Arc::clone(&first_seen));
    let url = serve(router).await;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(IdempotentRetries::new())
        .build();
    let started = std::time::Instant::now();
    let answer = client
        .post(format!("{url}/orders"))
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), StatusCode::CREATED);
    let attempts = answer.call_report().map(|i| i.attempts).unwrap_or_default();
    assert!(
        (3..=5).contains(&attempts),
        "asked again about once a second: {attempts} attempts in {:?}",
        started.elapsed()
    );
}

/// Every answer lost: the caller is told the key, the attempts and that the
/// debit may have run, and resuming with that key later gets the recorded
/// receipt instead of a second debit.
#[tokio::test]
async fn a_debit_whose_every_answer_is_lost_reports_its_key_and_resumes_once() {
    let url = payments_on_memory(MemoryStore::new()).await;
    let target = url.trim_start_matches("http://").parse().expect("address");
    let lossy = FaultProxy::start(target, vec![Fault::DropAnswer]).await;
    let client = client(
        RetryPolicy::default()
            .max_attempts(3)
            .backoff(Duration::from_millis(2), Duration::from_millis(10)),
    );
    let before = Payments::new(url.as_str()).balance("acct-lost").await;
    let debit = |base: &str| {
        client
            .post(format!("{base}/accounts/acct-lost/debits"))
            .json(&serde_json::json!({ "amount": 7 }))
    };
    let lost = debit(&lossy.url())
        .send()
        .await
        .expect_err("every answer is lost");
    let failed = CallFailed::in_error(&lost).expect("the middleware's report on the error");
    assert_eq!(failed.attempts, 3);
    assert!(failed.may_have_run, "{lost}");
    assert!(lost.to_string().contains(&failed.key), "{lost}");
    // It ran, once, although no answer came back.
    assert_eq!(
        Payments::new(url.as_str()).balance("acct-lost").await,
        before - 7
    );

    let resumed = debit(&url)
        .with_extension(failed.resume())
        .send()
        .await
        .expect("answered");
    assert_eq!(resumed.status(), StatusCode::CREATED);
    let how = resumed
        .call_report()
        .cloned()
        .expect("the middleware's report");
    assert_eq!(
        (how.key.as_str(), how.replayed),
        (failed.key.as_str(), true)
    );
    assert_eq!(
        Payments::new(url.as_str()).balance("acct-lost").await,
        before - 7,
        "debited once"
    );
}

/// Every connection refused: the caller is told the request never reached
/// the server.
#[tokio::test]
async fn a_debit_refused_at_every_attempt_says_it_did_not_run() {
    // Nothing listens on a port that was just free.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let client = client(
        RetryPolicy::default()
            .max_attempts(2)
            .backoff(Duration::from_millis(2), Duration::from_millis(10)),
    );
    let refused = client
        .post(format!("http://127.0.0.1:{port}/accounts/acct-x/debits"))
        .json(&serde_json::json!({ "amount": 7 }))
        .send()
        .await
        .expect_err("nothing listens");
    let failed = CallFailed::in_error(&refused).expect("the middleware's report on the error");
    assert_eq!(failed.attempts, 2);
    assert!(!failed.may_have_run, "{refused}");
}
