//! `#[idempotent(key_required = false)]`: a client that sends no
//! `Idempotency-Key` is served as if the handler had no attribute (each
//! request runs), one that sends a key gets exactly-once, and a malformed
//! key is still refused; on axum and on actix-web.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::{Json, Router};
use idem_core::{Engine, MemoryStore};
use idem_tests::{serve, serve_actix};
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    runs: Arc<AtomicUsize>,
}

#[derive(Serialize, Deserialize)]
struct Note {
    text: String,
}

#[idem_axum::idempotent(key_required = false)]
async fn add_note(State(runs): State<Arc<AtomicUsize>>, Json(note): Json<Note>) -> String {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    format!("note {n}: {}", note.text)
}

async fn post_note(base: &str, key: Option<&str>) -> (u16, bool, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/notes"))
        .header("content-type", "application/json")
        .body(r#"{"text":"hello"}"#);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.expect("answered");
    let replayed = response.headers().contains_key("idempotent-replayed");
    (
        response.status().as_u16(),
        replayed,
        response.text().await.expect("body"),
    )
}

async fn without_a_key_each_request_runs_and_with_one_it_runs_once(base: &str, runs: &AtomicUsize) {
    let first = post_note(base, None).await;
    let second = post_note(base, None).await;
    assert_eq!((first.0, first.1), (200, false), "{first:?}");
    assert_eq!((second.0, second.1), (200, false), "{second:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "no key: each request runs");

    let keyed = post_note(base, Some("note-1")).await;
    let retry = post_note(base, Some("note-1")).await;
    assert_eq!((keyed.0, keyed.1), (200, false));
    assert_eq!((retry.0, retry.1, &retry.2), (200, true, &keyed.2));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "a key: the retry is a replay"
    );

    let malformed = post_note(base, Some("a key with spaces")).await;
    assert_eq!(malformed.0, 400, "{malformed:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn on_axum_a_request_without_a_key_runs_unprotected_and_one_with_a_key_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .route("/notes", post(add_note))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
            runs: Arc::clone(&runs),
        });
    let base = serve(router).await;
    without_a_key_each_request_runs_and_with_one_it_runs_once(&base, &runs).await;
}

#[derive(Deserialize)]
struct ActixNote {
    text: String,
}

#[idem_actix::idempotent(key_required = false)]
async fn add_actix_note(
    runs: actix_web::web::Data<AtomicUsize>,
    note: actix_web::web::Json<ActixNote>,
) -> String {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    format!("note {n}: {}", note.text)
}

#[tokio::test]
async fn on_actix_a_request_without_a_key_runs_unprotected_and_one_with_a_key_once() {
    let runs = actix_web::web::Data::new(AtomicUsize::new(0));
    let engine = Engine::new(MemoryStore::new());
    let data = runs.clone();
    let base = serve_actix(move || {
        actix_web::App::new()
            .app_data(engine.clone())
            .app_data(data.clone())
            .route("/notes", actix_web::web::post().to(add_actix_note))
    });
    without_a_key_each_request_runs_and_with_one_it_runs_once(&base, &runs).await;
}
