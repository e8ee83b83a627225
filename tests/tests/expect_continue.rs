//! A client that sends `Expect: 100-continue` asks the server before it
//! sends its body (curl does for bodies over 1 KiB, as do many HTTP
//! libraries for uploads). Without an `Idempotency-Key`, the request is
//! refused whatever its body: the server answers 400 at once and never asks
//! for the body. Spoken over a raw socket, so that what goes on the wire is
//! what is checked.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::web::{self, Data, Json};
use actix_web::HttpResponse;
use idem_core::{Engine, MemoryStore};
use idem_tests::{payments_on_memory, serve, serve_actix};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: &str = r#"{"amount":100}"#;

/// Sends the head of a JSON POST with `Expect: 100-continue` (and `key`),
/// without its body, and reads what the server answers within a second.
/// When the server asks for the body (`100 Continue`), sends it if there is
/// a key (a keyless request must be answered without it) and reads on.
/// Returns the bytes received and whether the server asked.
async fn ask_before_sending(url: &str, path: &str, key: Option<&str>) -> (String, bool) {
    let addr = url.trim_start_matches("http://");
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    let key = key.map_or(String::new(), |k| format!("idempotency-key: {k}\r\n"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nexpect: 100-continue\r\n{key}\r\n",
        BODY.len()
    );
    socket.write_all(head.as_bytes()).await.expect("write head");
    let mut received = Vec::new();
    let mut asked = false;
    let mut buf = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(1), socket.read(&mut buf)).await;
        let Ok(Ok(n)) = read else { break };
        if n == 0 {
            break;
        }
        received.extend_from_slice(&buf[..n]);
        if !asked && received.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n") {
            asked = true;
            received.drain(..25);
            if !key.is_empty() {
                socket.write_all(BODY.as_bytes()).await.expect("write body");
            }
        }
        if final_answer_complete(&received) {
            break;
        }
    }
    (String::from_utf8_lossy(&received).into_owned(), asked)
}

/// Whether `bytes` hold a whole final answer (head and `content-length`
/// bytes of body).
fn final_answer_complete(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    body.len() >= length
}

/// Checks the answer to a request without a key: 400 problem+json, the
/// body never sent, and never asked for unless `may_ask` (the server's own
/// `100 Continue`, which actix-web sends before any service runs).
fn assert_refused_at_once(answer: &str, asked: bool, may_ask: bool, what: &str) {
    assert!(
        answer.starts_with("HTTP/1.1 400 "),
        "{what}: answered at once with 400, got {answer:?}"
    );
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("content-type: application/problem+json"),
        "{what}: {answer}"
    );
    assert!(
        answer.contains("urn:idem:problem:key-missing"),
        "{what}: {answer}"
    );
    if !may_ask {
        assert!(!asked, "{what}: the body was asked for: {answer}");
    }
}

#[tokio::test]
async fn a_client_that_asks_before_sending_its_body_without_a_key_is_refused_before_sending_it() {
    let url = payments_on_memory(MemoryStore::new()).await;
    let (answer, asked) = ask_before_sending(&url, "/accounts/ann/debits", None).await;
    assert_refused_at_once(&answer, asked, false, "payments (axum attribute)");

    // With a key the server asks for the body, and the debit runs.
    let (answer, asked) = ask_before_sending(&url, "/accounts/ann/debits", Some("e-1")).await;
    assert!(asked, "{answer}");
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    assert!(answer.contains(r#""balance":9900"#), "{answer}");
}

#[tokio::test]
async fn the_axum_layer_refuses_a_keyless_request_before_asking_for_its_body() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let app = axum::Router::new()
        .route(
            "/debits",
            axum::routing::post(move |body: String| {
                let runs = counted.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    body
                }
            }),
        )
        .layer(idem_axum::IdempotencyLayer::new(Engine::new(
            MemoryStore::new(),
        )));
    let url = serve(app).await;
    let (answer, asked) = ask_before_sending(&url, "/debits", None).await;
    assert_refused_at_once(&answer, asked, false, "axum layer");
    let (answer, asked) = ask_before_sending(&url, "/debits", Some("e-2")).await;
    assert!(asked && answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[derive(Deserialize)]
struct Debit {
    amount: u64,
}

#[idem_actix::idempotent]
async fn actix_debit(runs: Data<AtomicUsize>, Json(debit): Json<Debit>) -> HttpResponse {
    runs.fetch_add(1, Ordering::SeqCst);
    HttpResponse::Created().body(debit.amount.to_string())
}

/// actix-web writes `100 Continue` itself before any service runs (its
/// `HttpServer` offers no hook for it); what idem controls is that the
/// keyless request is answered without waiting for a body and runs nothing.
#[tokio::test]
async fn actix_web_answers_a_keyless_request_without_waiting_for_its_body() {
    let runs = Data::new(AtomicUsize::new(0));
    let engine = Engine::new(MemoryStore::new());
    let url = serve_actix({
        let runs = runs.clone();
        move || {
            actix_web::App::new()
                .app_data(engine.clone())
                .app_data(runs.clone())
                .route("/debits", web::post().to(actix_debit))
                .service(
                    web::scope("/layer")
                        .wrap(idem_actix::Idempotency::new(engine.clone()))
                        .route(
                            "/debits",
                            web::post().to(|body: String| async move { body }),
                        ),
                )
        }
    });
    for path in ["/debits", "/layer/debits"] {
        let (answer, asked) = ask_before_sending(&url, path, None).await;
        assert_refused_at_once(&answer, asked, true, path);
    }
    let (answer, asked) = ask_before_sending(&url, "/debits", Some("e-3")).await;
    assert!(asked && answer.starts_with("HTTP/1.1 201 "), "{answer}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
