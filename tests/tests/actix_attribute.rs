//! `#[idempotent]` on actix-web handlers (`idem_actix::idempotent`), over a
//! real socket: the handler form's semantics as a payments endpoint sees
//! them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::web::{self, Data, Json, Path};
use actix_web::{App, HttpResponse};
use http::StatusCode;
use idem_actix::idempotent;
use idem_core::{Engine, MemoryStore};
use idem_tests::{send_and_hang_up, serve_actix, HangUp};
use serde::Deserialize;

#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

#[derive(Deserialize)]
struct Debit {
    amount: u64,
}

/// Debits, slowly when asked; the receipt names the claim's fencing token.
#[idempotent(ttl = "24h", scope = "account", claim = claim)]
async fn debit(runs: Data<Runs>, account: Path<String>, Json(req): Json<Debit>) -> HttpResponse {
    let n = runs.0.fetch_add(1, Ordering::SeqCst) + 1;
    if req.amount == 1 {
        actix_web::rt::time::sleep(Duration::from_millis(800)).await;
    }
    HttpResponse::Created()
        .append_header(("set-cookie", "a=1"))
        .append_header(("set-cookie", "b=2"))
        .insert_header(("x-run", n))
        .json(serde_json::json!({
            "account": account.as_str(),
            "amount": req.amount,
            "debit_id": format!("dbt_{}", claim.fencing_token()),
        }))
}

#[derive(Deserialize)]
struct Event {
    id: String,
}

/// A webhook whose key is the event's own id.
#[idempotent(key = event.id)]
async fn webhook(runs: Data<Runs>, event: Json<Event>) -> String {
    let n = runs.0.fetch_add(1, Ordering::SeqCst) + 1;
    format!("{} handled, run {n}", event.id)
}

/// Handlers grouped on a type: the body calls the type's helpers through
/// `Self::`.
struct Refunds;

impl Refunds {
    fn fee(amount: u64) -> u64 {
        amount / 100
    }

    #[idempotent(scope = "account")]
    async fn refund(
        runs: Data<Runs>,
        account: Path<String>,
        Json(req): Json<Debit>,
    ) -> HttpResponse {
        let n = runs.0.fetch_add(1, Ordering::SeqCst) + 1;
        HttpResponse::Created()
            .insert_header(("x-run", n))
            .body(format!(
                "{account} refunded {} less {}",
                req.amount,
                Self::fee(req.amount)
            ))
    }
}

fn start(with_engine: bool) -> (String, Runs) {
    let runs = Runs::default();
    let engine = Engine::new(MemoryStore::new());
    let data = Data::new(runs.clone());
    let url = serve_actix(move || {
        let app = App::new()
            .app_data(data.clone())
            .route("/accounts/{account}/debits", web::post().to(debit))
            .route("/webhooks", web::post().to(webhook))
            .route(
                "/accounts/{account}/refunds",
                web::post().to(Refunds::refund),
            );
        if with_engine {
            app.app_data(engine.clone())
        } else {
            app
        }
    });
    (url, runs)
}

async fn post(url: &str, key: Option<&str>, body: &str) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    req.send().await.expect("request")
}

async fn snapshot(r: reqwest::Response) -> (u16, Vec<(String, Vec<u8>)>, Vec<u8>) {
    let status = r.status().as_u16();
    let mut headers: Vec<_> = r
        .headers()
        .iter()
        .filter(|(n, _)| *n != "date" && *n != "idempotent-replayed")
        .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
        .collect();
    // actix-web orders differently named headers its own way on every
    // response; one name's values keep their order.
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    (status, headers, r.bytes().await.expect("body").to_vec())
}

#[tokio::test]
async fn a_retried_debit_replays_the_first_answer_and_runs_once() {
    let (url, runs) = start(true);
    let path = format!("{url}/accounts/alice/debits");
    let first = snapshot(post(&path, Some("k1"), r#"{"amount":500}"#).await).await;
    assert_eq!(first.0, 201);
    let retry = post(&path, Some("k1"), "{ \"amount\" : 500 }").await;
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(snapshot(retry).await, first, "status, headers and body");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refund_handler_in_an_impl_block_calling_self_runs_once_and_replays() {
    let (url, runs) = start(true);
    let path = format!("{url}/accounts/carol/refunds");
    let first = snapshot(post(&path, Some("r1"), r#"{"amount":500}"#).await).await;
    assert_eq!(first.0, 201);
    assert_eq!(first.2, b"carol refunded 500 less 5");
    let retry = post(&path, Some("r1"), r#"{"amount":500}"#).await;
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(snapshot(retry).await, first);
    let reused = post(&path, Some("r1"), r#"{"amount":600}"#).await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn another_amount_under_the_key_is_422_and_another_account_is_a_new_debit() {
    let (url, runs) = start(true);
    post(
        &format!("{url}/accounts/bob/debits"),
        Some("k2"),
        r#"{"amount":500}"#,
    )
    .await;
    let reused = post(
        &format!("{url}/accounts/bob/debits"),
        Some("k2"),
        r#"{"amount":900}"#,
    )
    .await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reused.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = reused.json().await.expect("problem");
    assert_eq!(body["type"], "urn:idem:problem:key-reused");
    let other = post(
        &format!("{url}/accounts/carol/debits"),
        Some("k2"),
        r#"{"amount":500}"#,
    )
    .await;
    assert_eq!(other.status(), StatusCode::CREATED);
    assert!(!other.headers().contains_key("idempotent-replayed"));
    assert_eq!(runs.0.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_debit_without_a_key_or_with_a_bad_body_runs_nothing() {
    let (url, runs) = start(true);
    let path = format!("{url}/accounts/dave/debits");
    let missing = post(&path, None, r#"{"amount":500}"#).await;
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = missing.json().await.expect("problem");
    assert_eq!(body["type"], "urn:idem:problem:key-missing");
    let bad = post(&path, Some("k3"), r#"{"amount":"#).await;
    assert_eq!(
        bad.status(),
        StatusCode::BAD_REQUEST,
        "actix-web's Json rejection"
    );
    // The rejection claimed nothing: the corrected request runs.
    let good = post(&path, Some("k3"), r#"{"amount":5}"#).await;
    assert_eq!(good.status(), StatusCode::CREATED);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn sixty_four_concurrent_duplicates_debit_once() {
    let (url, runs) = start(true);
    let path = format!("{url}/accounts/erin/debits");
    let sends = (0..64).map(|_| {
        let path = path.clone();
        tokio::spawn(async move { post(&path, Some("k4"), r#"{"amount":1}"#).await.status() })
    });
    for status in futures_util::future::join_all(sends).await {
        let status = status.expect("task");
        assert!(
            status == StatusCode::CREATED || status == StatusCode::CONFLICT,
            "{status}"
        );
    }
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_debit_and_retries_gets_the_first_answer() {
    let (url, runs) = start(true);
    let addr = url.trim_start_matches("http://");
    send_and_hang_up(
        addr,
        "/accounts/frank/debits",
        "k5",
        Duration::from_millis(200),
        HangUp::Reset,
    )
    .await;
    let path = format!("{url}/accounts/frank/debits");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let answer = loop {
        let r = post(&path, Some("k5"), r#"{"amount":1}"#).await;
        if r.status() != StatusCode::CONFLICT || tokio::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(answer.status(), StatusCode::CREATED);
    assert_eq!(answer.headers()["idempotent-replayed"], "true");
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        1,
        "not cancelled, not run again"
    );
}

#[tokio::test]
async fn a_webhook_keyed_by_its_event_id_runs_once() {
    let (url, runs) = start(true);
    let first = post(&format!("{url}/webhooks"), None, r#"{"id":"evt_1"}"#).await;
    assert_eq!(first.text().await.expect("body"), "evt_1 handled, run 1");
    let again = post(&format!("{url}/webhooks"), None, r#"{"id":"evt_1"}"#).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.expect("body"), "evt_1 handled, run 1");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_app_without_an_engine_is_told_so_and_runs_nothing() {
    let (url, runs) = start(false);
    let r = post(
        &format!("{url}/accounts/grace/debits"),
        Some("k6"),
        r#"{"amount":5}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.text().await.expect("body").contains("app_data(engine"));
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
}

/// An application's own state, kept in `web::Data`, holding its engine.
struct AppState {
    engine: Engine,
    runs: Runs,
}

impl AsRef<Engine> for AppState {
    fn as_ref(&self) -> &Engine {
        &self.engine
    }
}

#[idempotent]
async fn pay(state: Data<AppState>, Json(req): Json<Debit>) -> HttpResponse {
    let n = state.runs.0.fetch_add(1, Ordering::SeqCst) + 1;
    HttpResponse::Created().body(format!("paid {} run {n}", req.amount))
}

#[tokio::test]
async fn an_app_that_keeps_its_engine_in_its_own_state_runs_each_payment_once() {
    let runs = Runs::default();
    let state = Data::new(AppState {
        engine: Engine::new(MemoryStore::new()),
        runs: runs.clone(),
    });
    let url = serve_actix(move || {
        App::new()
            .app_data(state.clone())
            .route("/pay", web::post().to(pay))
    });
    let first = snapshot(post(&format!("{url}/pay"), Some("p1"), r#"{"amount":7}"#).await).await;
    assert_eq!((first.0, &first.2[..]), (201, &b"paid 7 run 1"[..]));
    let retry = post(&format!("{url}/pay"), Some("p1"), r#"{"amount":7}"#).await;
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(snapshot(retry).await, first);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

/// Effects kept in this process, committed with the record.
#[derive(Clone, Default)]
struct Landed(Arc<AtomicUsize>);

/// Applies its effect in a memory transaction committed with its record
/// (`idem_actix::commit_response`), after a slow step.
#[idempotent(claim = claim)]
async fn transfer(store: Data<MemoryStore>, landed: Data<Landed>, body: String) -> HttpResponse {
    actix_web::rt::time::sleep(Duration::from_millis(400)).await;
    let mut tx = store.transaction();
    let landed = landed.0.clone();
    tx.apply("nothing", move || {
        landed.fetch_add(1, Ordering::SeqCst);
        true
    });
    let response = HttpResponse::Created().body(format!("transferred {body}"));
    idem_actix::commit_response(tx, &claim, response).await
}

fn start_transfers() -> (String, MemoryStore, Landed) {
    let store = MemoryStore::new();
    let engine = Engine::new(store.clone());
    let landed = Landed::default();
    let (s, l) = (Data::new(store.clone()), Data::new(landed.clone()));
    let url = serve_actix(move || {
        App::new()
            .app_data(engine.clone())
            .app_data(s.clone())
            .app_data(l.clone())
            .route("/transfers", web::post().to(transfer))
    });
    (format!("{url}/transfers"), store, landed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_committed_with_its_record_lands_once_and_is_replayed() {
    let (url, _, landed) = start_transfers();
    let first = post(&url, Some("t-1"), "10").await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first = first.bytes().await.expect("body");
    let again = post(&url, Some("t-1"), "10").await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert!(again.headers().contains_key("idempotent-replayed"));
    assert_eq!(again.bytes().await.expect("body"), first);
    assert_eq!(landed.0.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_force_removed_mid_way_takes_no_effect_and_its_retry_lands_once() {
    let (url, store, landed) = start_transfers();
    let first = tokio::spawn({
        let url = url.clone();
        async move { post(&url, Some("t-2"), "20").await }
    });
    let id = idem_core::RecordId::new(
        &idem_core::Scope::global(),
        &idem_core::IdempotencyKey::parse("t-2").expect("key"),
    );
    // Until the first request holds its claim (its slow step running).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !matches!(
        idem_core::Store::inspect(&store, &id).await,
        Ok(Some(idem_core::RecordInfo {
            state: idem_core::RecordInfoState::InFlight { .. },
            ..
        }))
    ) {
        assert!(std::time::Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let removed = idem_core::Store::remove(&store, &id, true)
        .await
        .expect("remove");
    assert_eq!(removed, idem_core::Removal::Removed);
    let retry = post(&url, Some("t-2"), "20").await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    let lost = first.await.expect("first request");
    assert_eq!(lost.status(), StatusCode::CONFLICT);
    assert!(lost.text().await.expect("body").contains("lease-lost"));
    assert_eq!(landed.0.load(Ordering::SeqCst), 1, "one effect");
}
