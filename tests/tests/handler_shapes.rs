//! `#[idempotent]` on the handler shapes people write, over a real socket:
//! each one runs once per key, replays byte for byte, and answers 422 when
//! the key is reused with another request, including requests that differ
//! only in what the handler's pattern ignores.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{FromRef, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    runs: Arc<AtomicUsize>,
}

impl App {
    fn ran(&self) -> usize {
        self.runs.fetch_add(1, Ordering::SeqCst) + 1
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    sku: String,
    qty: u32,
    note: Option<String>,
}

#[idempotent]
async fn impl_into_response(State(app): State<App>, Json(order): Json<Order>) -> impl IntoResponse {
    (
        StatusCode::CREATED,
        format!("run {} for {}", app.ran(), order.sku),
    )
}

/// An application error type, as in most services.
struct AppError(String);

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        (StatusCode::UNPROCESSABLE_ENTITY, self.0).into_response()
    }
}

#[derive(Serialize)]
struct Receipt {
    run: usize,
    qty: u32,
}

#[idempotent]
async fn result_json(
    State(app): State<App>,
    Json(order): Json<Order>,
) -> Result<Json<Receipt>, AppError> {
    let run = app.ran();
    if order.qty == 0 {
        return Err(AppError("qty must be positive".into()));
    }
    let qty = order.qty;
    Ok(Json(Receipt { run, qty }))
}

#[idempotent]
async fn result_impl(
    State(app): State<App>,
    Json(order): Json<Order>,
) -> Result<impl IntoResponse, AppError> {
    let n = app.ran();
    if order.sku.is_empty() {
        Err(AppError("sku missing".into()))
    } else {
        Ok((StatusCode::CREATED, format!("run {n}")))
    }
}

// The three patterns that used to leave body fields out of the fingerprint.
#[idempotent]
async fn rest_pattern(State(app): State<App>, Json(Order { sku, .. }): Json<Order>) -> String {
    format!("run {} for {sku}", app.ran())
}

#[idempotent]
async fn wildcard_inner(State(app): State<App>, Json(_): Json<Order>) -> String {
    format!("run {}", app.ran())
}

#[idempotent]
async fn wildcard_param(State(app): State<App>, _: Json<Order>) -> String {
    format!("run {}", app.ran())
}

/// A webhook receiver: the raw body, deduplicated by the sender's event id.
#[idempotent(key = event_id(&headers))]
async fn webhook(State(app): State<App>, headers: HeaderMap, body: Bytes) -> String {
    let _ = headers;
    format!("run {} for {} bytes", app.ran(), body.len())
}

fn event_id(headers: &HeaderMap) -> String {
    headers
        .get("x-event-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

#[derive(Deserialize, Serialize)]
struct Event {
    id: String,
    kind: String,
}

/// Deduplicated by an id in the JSON body.
#[idempotent(key = event.id)]
async fn event_in_body(State(app): State<App>, Json(event): Json<Event>) -> String {
    format!("run {} for {}", app.ran(), event.kind)
}

#[idempotent]
async fn string_body(State(app): State<App>, mut body: String) -> String {
    body.push('!');
    format!("run {} {body}", app.ran())
}

/// A body-consuming extractor last: the body is fingerprinted and handed on.
#[idempotent]
async fn whole_request(State(app): State<App>, request: Request) -> String {
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    format!("run {} read {}", app.ran(), String::from_utf8_lossy(&bytes))
}

#[idempotent]
async fn raw_body(State(app): State<App>, body: Body) -> String {
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    format!("run {} read {}", app.ran(), bytes.len())
}

#[derive(Deserialize, Serialize)]
struct Transfer {
    to: String,
    amount: u64,
}

#[idempotent(scope = "account")]
async fn form_and_query(
    State(app): State<App>,
    Path(account): Path<String>,
    Query(page): Query<std::collections::BTreeMap<String, String>>,
    Form(transfer): Form<Transfer>,
) -> String {
    format!(
        "run {} {account} {} {} {}",
        app.ran(),
        page.len(),
        transfer.to,
        transfer.amount
    )
}

#[idempotent]
async fn with_headers(State(app): State<App>, headers: HeaderMap) -> String {
    format!("run {} with {} headers", app.ran(), headers.len())
}

#[idempotent]
async fn any_json(State(app): State<App>, Json(value): Json<serde_json::Value>) -> String {
    format!("run {} {}", app.ran(), value["a"])
}

/// A custom extractor that describes the request, so it is fingerprinted.
#[derive(Serialize)]
struct Tenant(String);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = StatusCode;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, StatusCode> {
        let tenant = parts
            .headers
            .get("x-tenant")
            .ok_or(StatusCode::UNAUTHORIZED)?;
        Ok(Tenant(
            tenant
                .to_str()
                .map_err(|_| StatusCode::BAD_REQUEST)?
                .to_owned(),
        ))
    }
}

#[idempotent(scope = "tenant")]
async fn custom_extractor(
    State(app): State<App>,
    Tenant(tenant): Tenant,
    Json(order): Json<Order>,
) -> String {
    format!("run {} {tenant} {}", app.ran(), order.qty)
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Takes only its part of the router state; the engine is another part.
#[idempotent]
async fn substate(State(runs): State<Arc<AtomicUsize>>, Json(order): Json<Order>) -> String {
    let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
    format!("run {run} {}", order.qty)
}

/// Passes its claim's fencing token downstream.
#[idempotent(claim = claim)]
#[axum::debug_handler]
async fn with_claim(State(app): State<App>, Json(order): Json<Order>) -> String {
    format!(
        "run {} {} token {}",
        app.ran(),
        order.qty,
        claim.fencing_token()
    )
}

/// Handlers grouped on a type, as services often write them: the body
/// calls the type's own helpers through `Self::` and returns `Self`'s
/// error type.
struct Orders;

#[derive(Debug)]
struct OrderRefused(&'static str);

impl IntoResponse for OrderRefused {
    fn into_response(self) -> Response {
        (StatusCode::UNPROCESSABLE_ENTITY, self.0).into_response()
    }
}

impl Orders {
    const MAX_QTY: u32 = 10;

    fn check(order: &Order) -> Result<(), OrderRefused> {
        if order.qty > Self::MAX_QTY {
            return Err(OrderRefused("at most 10 per order"));
        }
        Ok(())
    }

    #[idempotent(name = "place_order")]
    async fn place(
        State(app): State<App>,
        Json(order): Json<Order>,
    ) -> Result<String, OrderRefused> {
        let run = app.ran();
        Self::check(&order)?;
        Ok(format!("run {run} placed {} {}", order.qty, order.sku))
    }

    #[idempotent(claim = claim)]
    async fn cancel(
        State(app): State<App>,
        Json(order): Json<Order>,
    ) -> Result<String, OrderRefused> {
        let run = app.ran();
        Self::check(&order)?;
        Ok(format!(
            "run {run} cancelled {} token {}",
            order.sku,
            claim.fencing_token()
        ))
    }
}

async fn start() -> (String, App) {
    let app = App {
        engine: Engine::new(MemoryStore::new()),
        runs: Arc::new(AtomicUsize::new(0)),
    };
    let router = Router::new()
        .route("/impl", post(impl_into_response))
        .route("/result-json", post(result_json))
        .route("/result-impl", post(result_impl))
        .route("/rest", post(rest_pattern))
        .route("/wild-inner", post(wildcard_inner))
        .route("/wild-param", post(wildcard_param))
        .route("/webhook", post(webhook))
        .route("/event", post(event_in_body))
        .route("/string", post(string_body))
        .route("/request", post(whole_request))
        .route("/body", post(raw_body))
        .route("/accounts/{account}/transfers", post(form_and_query))
        .route("/json", post(any_json))
        .route("/headers", post(with_headers))
        .route("/custom", post(custom_extractor))
        .route("/substate", post(substate))
        .route("/claim", post(with_claim))
        .route("/orders", post(Orders::place))
        .route("/orders/cancel", post(Orders::cancel))
        .with_state(app.clone());
    (idem_tests::serve(router).await, app)
}

struct Answer {
    status: StatusCode,
    replayed: bool,
    body: Bytes,
}

async fn send(url: &str, key: Option<&str>, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut r = reqwest::Client::new().post(url).body(body.to_owned());
    if let Some(key) = key {
        r = r.header("idempotency-key", key);
    }
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    let r = r.send().await.expect("request");
    Answer {
        status: r.status(),
        replayed: r.headers().contains_key("idempotent-replayed"),
        body: r.bytes().await.expect("body"),
    }
}

const JSON: (&str, &str) = ("content-type", "application/json");

/// Sends `first` twice and `other` once under one key: the first runs, the
/// second replays byte for byte, the third is refused as a reused key.
async fn once_replayed_and_other_refused(
    url: &str,
    key: &str,
    headers: &[(&str, &str)],
    first: &str,
    other: &str,
    app: &App,
) {
    let before = app.runs.load(Ordering::SeqCst);
    let a = send(url, Some(key), headers, first).await;
    assert!(
        a.status.is_success() || a.status.is_client_error(),
        "{url}: {}",
        a.status
    );
    assert!(!a.replayed);
    let b = send(url, Some(key), headers, first).await;
    assert!(b.replayed, "{url}: the retry is a replay");
    assert_eq!(
        (b.status, &b.body),
        (a.status, &a.body),
        "{url}: byte for byte"
    );
    let c = send(url, Some(key), headers, other).await;
    assert_eq!(
        c.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{url}: another request under the same key"
    );
    assert!(
        String::from_utf8_lossy(&c.body).contains("key-reused"),
        "{url}: {:?}",
        c.body
    );
    assert_eq!(
        app.runs.load(Ordering::SeqCst),
        before + 1,
        "{url}: ran once"
    );
}

#[tokio::test]
async fn impl_into_response_and_result_returns_record_and_replay() {
    let (url, app) = start().await;
    let order = r#"{"sku":"tea","qty":2,"note":null}"#;
    let other = r#"{"sku":"tea","qty":3,"note":null}"#;
    for path in ["/impl", "/result-json", "/result-impl"] {
        once_replayed_and_other_refused(&format!("{url}{path}"), path, &[JSON], order, other, &app)
            .await;
    }
    // An `Err` the handler returns is an answer too: recorded and replayed.
    let zero = r#"{"sku":"tea","qty":0,"note":null}"#;
    once_replayed_and_other_refused(
        &format!("{url}/result-json"),
        "zero",
        &[JSON],
        zero,
        order,
        &app,
    )
    .await;
}

#[tokio::test]
async fn handlers_in_an_impl_block_that_call_self_run_once_and_replay() {
    let (url, app) = start().await;
    let order = r#"{"sku":"tea","qty":2,"note":null}"#;
    let other = r#"{"sku":"tea","qty":3,"note":null}"#;
    let too_many = r#"{"sku":"tea","qty":11,"note":null}"#;
    for path in ["/orders", "/orders/cancel"] {
        once_replayed_and_other_refused(&format!("{url}{path}"), path, &[JSON], order, other, &app)
            .await;
        let key = format!("{path}-too-many");
        once_replayed_and_other_refused(
            &format!("{url}{path}"),
            &key,
            &[JSON],
            too_many,
            order,
            &app,
        )
        .await;
    }
}

#[tokio::test]
async fn a_field_the_pattern_ignores_still_tells_requests_apart() {
    let (url, app) = start().await;
    let order = r#"{"sku":"tea","qty":2,"note":"gift"}"#;
    // Differs only in `qty` and `note`, which these handlers do not bind.
    let other = r#"{"sku":"tea","qty":9,"note":"not a gift"}"#;
    for path in ["/rest", "/wild-inner", "/wild-param"] {
        once_replayed_and_other_refused(&format!("{url}{path}"), path, &[JSON], order, other, &app)
            .await;
    }
}

#[tokio::test]
async fn body_extractors_fingerprint_the_body_and_hand_it_on() {
    let (url, app) = start().await;
    for path in ["/string", "/request", "/body"] {
        once_replayed_and_other_refused(
            &format!("{url}{path}"),
            path,
            &[],
            "payload-1",
            "payload-2",
            &app,
        )
        .await;
    }
    // The body reached the handler whole.
    let r = send(&format!("{url}/request"), Some("read-it"), &[], "hello").await;
    assert!(
        String::from_utf8_lossy(&r.body).ends_with("read hello"),
        "{:?}",
        r.body
    );
    // A JSON body is compared parsed: key order and spacing do not matter.
    let a = send(
        &format!("{url}/string"),
        Some("json-body"),
        &[JSON],
        r#"{"a":1,"b":2}"#,
    )
    .await;
    let b = send(
        &format!("{url}/string"),
        Some("json-body"),
        &[JSON],
        r#"{ "b": 2, "a": 1 }"#,
    )
    .await;
    assert!(b.replayed && a.body == b.body);
}

#[tokio::test]
async fn a_webhook_is_deduplicated_by_its_event_id_without_an_idempotency_key() {
    let (url, app) = start().await;
    let hook = format!("{url}/webhook");
    let first = send(&hook, None, &[("x-event-id", "evt_1")], "charge.succeeded").await;
    assert_eq!(first.status, StatusCode::OK);
    let again = send(&hook, None, &[("x-event-id", "evt_1")], "charge.succeeded").await;
    assert!(
        again.replayed && again.body == first.body,
        "the redelivered event replays"
    );
    let other = send(&hook, None, &[("x-event-id", "evt_1")], "charge.refunded").await;
    assert_eq!(
        other.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "same event id, other body"
    );
    let next = send(&hook, None, &[("x-event-id", "evt_2")], "charge.succeeded").await;
    assert!(!next.replayed);
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);
    // No event id: the key expression gives an empty key, refused with 400.
    let keyless = send(&hook, None, &[], "charge.succeeded").await;
    assert_eq!(keyless.status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&keyless.body).contains("key-malformed"));

    let event = format!("{url}/event");
    let body = r#"{"id":"evt_9","kind":"paid"}"#;
    let first = send(&event, None, &[JSON], body).await;
    let again = send(&event, None, &[JSON], body).await;
    assert!(!first.replayed && again.replayed && first.body == again.body);
}

#[tokio::test]
async fn form_query_json_value_and_custom_extractors_are_fingerprinted() {
    let (url, app) = start().await;
    let form = [("content-type", "application/x-www-form-urlencoded")];
    once_replayed_and_other_refused(
        &format!("{url}/accounts/acc-1/transfers?page=1"),
        "form",
        &form,
        "to=bob&amount=5",
        "to=bob&amount=6",
        &app,
    )
    .await;
    once_replayed_and_other_refused(
        &format!("{url}/json"),
        "json",
        &[JSON],
        r#"{"a":1}"#,
        r#"{"a":2}"#,
        &app,
    )
    .await;
    let tenant = [JSON, ("x-tenant", "acme")];
    once_replayed_and_other_refused(
        &format!("{url}/custom"),
        "custom",
        &tenant,
        r#"{"sku":"a","qty":1,"note":null}"#,
        r#"{"sku":"a","qty":2,"note":null}"#,
        &app,
    )
    .await;
    // The query is part of the request: another page is another request.
    let r = send(
        &format!("{url}/accounts/acc-1/transfers?page=2"),
        Some("form"),
        &form,
        "to=bob&amount=5",
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn a_header_map_is_fingerprinted_but_for_what_changes_between_attempts() {
    let (url, app) = start().await;
    let target = format!("{url}/headers");
    let first = send(
        &target,
        Some("h-1"),
        &[
            ("x-tier", "gold"),
            ("authorization", "Bearer t1"),
            ("x-request-id", "r1"),
        ],
        "",
    )
    .await;
    assert!(!first.replayed);
    // A retry with a refreshed token and a new request id is the same request.
    let retry = send(
        &target,
        Some("h-1"),
        &[
            ("x-tier", "gold"),
            ("authorization", "Bearer t2"),
            ("x-request-id", "r2"),
        ],
        "",
    )
    .await;
    assert!(retry.replayed && retry.body == first.body);
    // A header that describes the request is part of it.
    let other = send(
        &target,
        Some("h-1"),
        &[("x-tier", "silver"), ("authorization", "Bearer t2")],
        "",
    )
    .await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(app.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn handler_that_takes_part_of_the_state_finds_the_engine_in_the_rest() {
    let (url, app) = start().await;
    let order = r#"{"sku":"tea","qty":2,"note":null}"#;
    let other = r#"{"sku":"tea","qty":3,"note":null}"#;
    once_replayed_and_other_refused(
        &format!("{url}/substate"),
        "part",
        &[JSON],
        order,
        other,
        &app,
    )
    .await;
}

#[tokio::test]
async fn handler_passes_its_fencing_token_downstream_and_retries_get_the_same_answer() {
    let (url, app) = start().await;
    let order = r#"{"sku":"tea","qty":2,"note":null}"#;
    let other = r#"{"sku":"tea","qty":3,"note":null}"#;
    once_replayed_and_other_refused(
        &format!("{url}/claim"),
        "token",
        &[JSON],
        order,
        other,
        &app,
    )
    .await;
    let a = send(&format!("{url}/claim"), Some("token"), &[JSON], order).await;
    let body = String::from_utf8_lossy(&a.body);
    assert!(body.contains(" token "), "{body}");
}
