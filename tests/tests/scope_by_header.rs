//! `#[idempotent(scope = header("x-api-key"))]`: keys are kept per API key,
//! as a Stripe-shaped API keeps them, without an extractor of the
//! application's own; a request without the header is refused, saying
//! which header; on axum and on actix-web.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::{Form, Router};
use idem_core::{Engine, MemoryStore};
use idem_tests::{serve, serve_actix};
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    runs: Arc<AtomicUsize>,
}

#[derive(Serialize, Deserialize)]
struct Charge {
    amount: u64,
}

#[idem_axum::idempotent(ttl = "24h", scope = header("X-Api-Key"))]
async fn charge(State(runs): State<Arc<AtomicUsize>>, Form(charge): Form<Charge>) -> String {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    format!("ch_{n}: {}", charge.amount)
}

async fn post_charge(base: &str, api_key: Option<&str>, key: &str) -> (u16, bool, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/charges"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("idempotency-key", key)
        .body("amount=1000");
    if let Some(api_key) = api_key {
        request = request.header("x-api-key", api_key);
    }
    let response = request.send().await.expect("answered");
    let replayed = response.headers().contains_key("idempotent-replayed");
    (
        response.status().as_u16(),
        replayed,
        response.text().await.expect("body"),
    )
}

async fn each_api_key_has_keys_of_its_own(base: &str, runs: &AtomicUsize) {
    let alice = post_charge(base, Some("sk_alice"), "charge-1").await;
    let bob = post_charge(base, Some("sk_bob"), "charge-1").await;
    assert_eq!((alice.0, alice.1), (200, false), "{alice:?}");
    assert_eq!(
        (bob.0, bob.1),
        (200, false),
        "the same key under another API key runs: {bob:?}"
    );
    let retry = post_charge(base, Some("sk_alice"), "charge-1").await;
    assert_eq!((retry.0, retry.1, &retry.2), (200, true, &alice.2));
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    let anonymous = post_charge(base, None, "charge-1").await;
    assert_eq!(anonymous.0, 400, "{anonymous:?}");
    assert!(anonymous.2.contains("x-api-key"), "{}", anonymous.2);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn on_axum_each_api_key_has_keys_of_its_own() {
    let runs = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .route("/v1/charges", post(charge))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
            runs: Arc::clone(&runs),
        });
    let base = serve(router).await;
    each_api_key_has_keys_of_its_own(&base, &runs).await;
}

#[derive(Deserialize)]
struct ActixCharge {
    amount: u64,
}

#[idem_actix::idempotent(scope = header("x-api-key"))]
async fn actix_charge(
    runs: actix_web::web::Data<AtomicUsize>,
    charge: actix_web::web::Form<ActixCharge>,
) -> String {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    format!("ch_{n}: {}", charge.amount)
}

#[tokio::test]
async fn on_actix_each_api_key_has_keys_of_its_own() {
    let runs = actix_web::web::Data::new(AtomicUsize::new(0));
    let engine = Engine::new(MemoryStore::new());
    let data = runs.clone();
    let base = serve_actix(move || {
        actix_web::App::new()
            .app_data(engine.clone())
            .app_data(data.clone())
            .route("/v1/charges", actix_web::web::post().to(actix_charge))
    });
    each_api_key_has_keys_of_its_own(&base, &runs).await;
}
