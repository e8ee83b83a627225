//! `#[idempotent]` behaves exactly as the hand-written engine calls do: one
//! execution under 64 concurrent duplicates, replay, mismatch, release of
//! transient failures, on a consumer function, a `&self` method and an axum
//! handler. Compiled under `clippy::pedantic` (with `-D warnings` in CI), so
//! the expansion is shown to be warning-free.

#![deny(clippy::pedantic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRef, Path, State};
use axum::http::{header, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use idem_core::{idempotent, Engine, Error, Failure, MemoryStore, Ran};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
struct OrderPlaced {
    id: String,
    sku: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Shipment {
    parcel: u64,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum ShipError {
    OutOfStock,
    CarrierDown,
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        matches!(self, ShipError::OutOfStock)
    }
}

static FREE_FN_RUNS: AtomicUsize = AtomicUsize::new(0);

#[idempotent(engine = engine, key = msg.id, ttl = "1h", claim = claim)]
async fn ship(engine: &Engine, msg: OrderPlaced) -> Result<Shipment, ShipError> {
    FREE_FN_RUNS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    match msg.sku.as_str() {
        "none" => Err(ShipError::OutOfStock),
        "flaky" => Err(ShipError::CarrierDown),
        _ => Ok(Shipment {
            parcel: claim.fencing_token().0,
        }),
    }
}

fn order(id: &str, sku: &str) -> OrderPlaced {
    OrderPlaced {
        id: id.into(),
        sku: sku.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_function_runs_once_under_64_duplicates_and_replays() {
    let engine = Engine::new(MemoryStore::new());
    let before = FREE_FN_RUNS.load(Ordering::SeqCst);
    let start = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (engine, start) = (engine.clone(), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            ship(&engine, order("m-64", "tea")).await
        }));
    }
    let (mut executed, mut other) = (0, 0);
    for t in tasks {
        match t.await.expect("task") {
            Ok(Ran::Executed(_)) => executed += 1,
            Ok(Ran::Replayed(_)) | Err(Error::InFlight { .. }) => other += 1,
            Err(e) => panic!("unexpected: {e:?}"),
        }
    }
    assert_eq!((executed, other), (1, 63));
    assert_eq!(
        FREE_FN_RUNS.load(Ordering::SeqCst) - before,
        1,
        "the body ran once"
    );
    let replay = ship(&engine, order("m-64", "tea")).await.expect("replay");
    assert!(replay.is_replayed());
    // The same key with another message is refused, and runs nothing.
    let mismatch = ship(&engine, order("m-64", "coffee")).await;
    assert!(matches!(mismatch, Err(Error::Mismatch)), "{mismatch:?}");
    assert_eq!(FREE_FN_RUNS.load(Ordering::SeqCst) - before, 1);
}

#[tokio::test]
async fn consumer_function_records_final_failures_and_releases_transient_ones() {
    let engine = Engine::new(MemoryStore::new());
    let first = ship(&engine, order("m-none", "none")).await;
    assert!(matches!(
        first,
        Err(Error::Failed(Ran::Executed(ShipError::OutOfStock)))
    ));
    let again = ship(&engine, order("m-none", "none")).await;
    assert!(
        matches!(
            again,
            Err(Error::Failed(Ran::Replayed(ShipError::OutOfStock)))
        ),
        "recorded"
    );
    for _ in 0..2 {
        let flaky = ship(&engine, order("m-flaky", "flaky")).await;
        assert!(
            matches!(
                flaky,
                Err(Error::Failed(Ran::Executed(ShipError::CarrierDown)))
            ),
            "released, so each retry runs again: {flaky:?}"
        );
    }
    let bad_key = ship(&engine, order("", "tea")).await;
    assert!(matches!(bad_key, Err(Error::InvalidKey(_))), "{bad_key:?}");
}

struct Consumer {
    engine: Engine,
    runs: AtomicUsize,
}

impl Consumer {
    #[idempotent(engine = self.engine, key = msg.id, skip(attempt))]
    async fn handle(&self, msg: &OrderPlaced, attempt: u32) -> Result<u32, ShipError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(attempt)
    }
}

#[tokio::test]
async fn method_with_a_skipped_parameter_replays_across_attempts() {
    let consumer = Consumer {
        engine: Engine::new(MemoryStore::new()),
        runs: AtomicUsize::new(0),
    };
    let msg = order("m-7", "tea");
    assert_eq!(
        consumer.handle(&msg, 1).await.expect("first"),
        Ran::Executed(1)
    );
    // `attempt` is not part of the request: the redelivery replays.
    assert_eq!(
        consumer.handle(&msg, 2).await.expect("redelivery"),
        Ran::Replayed(1)
    );
    assert_eq!(consumer.runs.load(Ordering::SeqCst), 1);
}

mod workflow {
    //! A function whose argument's type is named `State` (not axum's).
    use super::{
        idempotent, AtomicUsize, Deserialize, Engine, Error, MemoryStore, Ordering, Ran, Serialize,
        ShipError,
    };

    /// A workflow's own state, which its steps take as an argument.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    enum State {
        Pending,
        Approved,
    }

    static STEP_RUNS: AtomicUsize = AtomicUsize::new(0);

    #[idempotent(engine = engine, key = id)]
    async fn advance(engine: &Engine, id: &str, from: State) -> Result<State, ShipError> {
        STEP_RUNS.fetch_add(1, Ordering::SeqCst);
        Ok(match from {
            State::Pending | State::Approved => State::Approved,
        })
    }

    #[tokio::test]
    async fn an_argument_whose_type_is_named_state_is_part_of_the_request() {
        let engine = Engine::new(MemoryStore::new());
        let first = advance(&engine, "wf-1", State::Pending).await;
        assert_eq!(first.expect("first"), Ran::Executed(State::Approved));
        let again = advance(&engine, "wf-1", State::Pending).await;
        assert_eq!(again.expect("retry"), Ran::Replayed(State::Approved));
        // Another value under the same key is another request, not a replay.
        let other = advance(&engine, "wf-1", State::Approved).await;
        assert!(matches!(other, Err(Error::Mismatch)), "{other:?}");
        assert_eq!(STEP_RUNS.load(Ordering::SeqCst), 1);
    }
}

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    debits: Arc<AtomicUsize>,
}

#[derive(Serialize, Deserialize)]
struct Debit {
    amount: u64,
}

#[idem_axum::idempotent(ttl = "24h", scope = "account")]
async fn debit(
    State(app): State<App>,
    Path(account): Path<String>,
    Json(req): Json<Debit>,
) -> (StatusCode, String) {
    let n = app.debits.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::time::sleep(Duration::from_millis(100)).await;
    (
        StatusCode::CREATED,
        format!("debit {n} of {} on {account}", req.amount),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_handler_runs_once_and_replays_byte_for_byte() {
    let debits = Arc::new(AtomicUsize::new(0));
    let url = idem_tests::serve(
        Router::new()
            .route("/accounts/{account}/debits", post(debit))
            .with_state(App {
                engine: Engine::new(MemoryStore::new()),
                debits: Arc::clone(&debits),
            }),
    )
    .await;
    let c = reqwest::Client::new();
    let post = |account: &str, key: &str, body: &str| {
        c.post(format!("{url}/accounts/{account}/debits"))
            .header("idempotency-key", key)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.to_owned())
            .send()
    };
    let start = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (start, fut) = (Arc::clone(&start), post("ann", "k-64", r#"{"amount":5}"#));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let r = fut.await.expect("request");
            (
                r.status(),
                r.headers().contains_key("idempotent-replayed"),
                r.text().await.expect("body"),
            )
        }));
    }
    let mut bodies = Vec::new();
    for t in tasks {
        let (status, replayed, body) = t.await.expect("task");
        match status {
            StatusCode::CREATED => bodies.push((replayed, body)),
            StatusCode::CONFLICT => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(
        debits.load(Ordering::SeqCst),
        1,
        "one debit under 64 duplicates"
    );
    assert_eq!(bodies.iter().filter(|(replayed, _)| !replayed).count(), 1);
    let replay = post("ann", "k-64", r#"{ "amount" : 5 }"#)
        .await
        .expect("replay");
    assert!(replay.headers().contains_key("idempotent-replayed"));
    assert_eq!(replay.text().await.expect("body"), "debit 1 of 5 on ann");
    let reused = post("ann", "k-64", r#"{"amount":6}"#)
        .await
        .expect("reused");
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let missing = c
        .post(format!("{url}/accounts/ann/debits"))
        .json(&serde_json::json!({"amount": 5}))
        .send()
        .await
        .expect("no key");
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    // The scope is the account: the same key elsewhere is another debit.
    let other = post("bob", "k-64", r#"{"amount":5}"#)
        .await
        .expect("other account");
    assert_eq!(other.text().await.expect("body"), "debit 2 of 5 on bob");
    assert_eq!(debits.load(Ordering::SeqCst), 2);
}
