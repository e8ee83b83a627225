//! An API with its own error format (Stripe's `{"error": {"type", "code",
//! "message"}}`) answers idem's refusals in that format, on axum (the
//! attribute and the layer), actix-web and tonic, with the status and
//! `Retry-After` idem chose; the application's own errors and its
//! successful answers pass untouched; `problem_json` keeps a JSON error
//! body the application wrote itself.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use http::StatusCode;
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};
use idem_tests::{serve, serve_actix};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::{Notify, Semaphore};

/// Stripe's error shape, from what idem says.
fn stripe_error(problem: &idem_axum::Problem) -> Response {
    let body = json!({"error": {
        "type": "idempotency_error",
        "code": problem.kind().slug(),
        "message": problem.detail(),
    }});
    (problem.status(), Json(body)).into_response()
}

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    gate: Arc<Semaphore>,
    started: Arc<Notify>,
}

#[derive(Serialize, Deserialize)]
struct Charge {
    amount: u64,
}

/// Charges; an amount of 0 is the application's own 400 in its own format;
/// an amount of 500 waits at the gate.
#[idempotent(ttl = "1h")]
async fn charge(
    State(gate): State<Arc<Semaphore>>,
    State(started): State<Arc<Notify>>,
    Json(charge): Json<Charge>,
) -> Response {
    if charge.amount == 0 {
        let body = json!({"error": {"type": "invalid_request_error", "message": "amount must be at least 1"}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    if charge.amount == 500 {
        started.notify_one();
        let _permit = gate.acquire().await;
    }
    (
        StatusCode::CREATED,
        Json(json!({"object": "charge", "amount": charge.amount})),
    )
        .into_response()
}

fn app() -> (Router, Arc<Semaphore>, Arc<Notify>) {
    let state = App {
        engine: Engine::new(MemoryStore::new()),
        gate: Arc::new(Semaphore::new(0)),
        started: Arc::new(Notify::new()),
    };
    let (gate, started) = (Arc::clone(&state.gate), Arc::clone(&state.started));
    let layered = Router::new()
        .route(
            "/v1/refunds",
            post(|| async { (StatusCode::CREATED, "refunded") }),
        )
        .layer(idem_axum::IdempotencyLayer::new(state.engine.clone()));
    let router = Router::new()
        .route("/v1/charges", post(charge))
        .with_state(state)
        .merge(layered)
        .layer(idem_axum::problem_format(stripe_error))
        .layer(map_response(idem_axum::problem_json));
    (router, gate, started)
}

async fn post_json(base: &str, path: &str, key: Option<&str>, body: &str) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.send().await.expect("answered")
}

async fn error_code(response: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = response.json().await.expect("a JSON body");
    (status, retry_after, body)
}

#[tokio::test]
async fn a_stripe_shaped_api_answers_idem_s_refusals_in_its_own_format() {
    let (router, gate, started) = app();
    let base = serve(router).await;

    // No key: 400, in the application's format.
    let (status, _, body) =
        error_code(post_json(&base, "/v1/charges", None, r#"{"amount":5}"#).await).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "key-missing", "{body}");
    assert_eq!(body["error"]["type"], "idempotency_error");

    // A duplicate while the first runs: 409 with Retry-After, in its format.
    let first = tokio::spawn({
        let base = base.clone();
        async move {
            let response = post_json(&base, "/v1/charges", Some("ch-1"), r#"{"amount":500}"#).await;
            (
                response.status().as_u16(),
                response.bytes().await.expect("body"),
            )
        }
    });
    started.notified().await;
    let (status, retry_after, body) =
        error_code(post_json(&base, "/v1/charges", Some("ch-1"), r#"{"amount":500}"#).await).await;
    assert_eq!((status, retry_after.as_deref()), (409, Some("1")), "{body}");
    assert_eq!(body["error"]["code"], "request-in-flight", "{body}");
    gate.add_permits(1);
    let (status, first_body) = first.await.expect("first request");
    assert_eq!(status, 201);

    // The replay is the first answer, byte for byte, untouched by the hook.
    let replay = post_json(&base, "/v1/charges", Some("ch-1"), r#"{ "amount": 500 }"#).await;
    assert_eq!(replay.status().as_u16(), 201);
    assert_eq!(replay.bytes().await.expect("body"), first_body);

    // The same key with another amount: 422, in its format.
    let (status, _, body) =
        error_code(post_json(&base, "/v1/charges", Some("ch-1"), r#"{"amount":7}"#).await).await;
    assert_eq!(status, 422);
    assert_eq!(body["error"]["code"], "key-reused", "{body}");

    // The layer's refusals too.
    let (status, _, body) = error_code(post_json(&base, "/v1/refunds", None, "{}").await).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "key-missing", "{body}");
}

#[tokio::test]
async fn the_application_s_own_errors_pass_untouched_through_the_hook_and_problem_json() {
    let (router, _, _) = app();
    let base = serve(router).await;
    let response = post_json(&base, "/v1/charges", Some("ch-0"), r#"{"amount":0}"#).await;
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(
        body,
        json!({"error": {"type": "invalid_request_error", "message": "amount must be at least 1"}})
    );
}

#[tokio::test]
async fn problem_json_keeps_a_json_error_the_application_wrote() {
    let router = Router::new()
        .route(
            "/v1/charges",
            post(|| async {
                let body = json!({"error": {"type": "invalid_request_error", "code": "parameter_missing"}});
                (StatusCode::BAD_REQUEST, Json(body))
            }),
        )
        .route("/v1/tokens", post(|| async { StatusCode::UNAUTHORIZED }))
        .layer(map_response(idem_axum::problem_json));
    let base = serve(router).await;
    let response = post_json(&base, "/v1/charges", None, "{}").await;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "parameter_missing", "{body}");
    // An error with no body still becomes a problem.
    let response = post_json(&base, "/v1/tokens", None, "{}").await;
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json")
    );
}

#[tokio::test]
async fn an_actix_app_answers_idem_s_refusals_in_its_own_format() {
    let render = |problem: &idem_actix::Problem| {
        let status = actix_web::http::StatusCode::from_u16(problem.status())
            .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR);
        actix_web::HttpResponse::build(status).json(json!({"error": {
            "type": "idempotency_error",
            "code": problem.kind().slug(),
            "message": problem.detail(),
        }}))
    };
    let base = serve_actix(move || {
        let engine = Engine::new(MemoryStore::new());
        actix_web::App::new()
            .wrap(idem_actix::Idempotency::new(engine))
            .wrap(idem_actix::ProblemFormat::new(render))
            .route(
                "/v1/charges",
                actix_web::web::post()
                    .to(|| async { actix_web::HttpResponse::Created().body("charged") }),
            )
    });
    let (status, _, body) = error_code(post_json(&base, "/v1/charges", None, "{}").await).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "key-missing", "{body}");
    let (status, _, body) =
        error_code(post_json(&base, "/v1/charges", Some("a key with spaces"), "{}").await).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "key-malformed", "{body}");
    let ok = post_json(&base, "/v1/charges", Some("ch-1"), "{}").await;
    assert_eq!(ok.status().as_u16(), 201);
    assert_eq!(ok.text().await.expect("body"), "charged");
}
