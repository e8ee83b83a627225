//! The payments debit without idem: the benchmarks' baseline. The same
//! checks, provider call, ledger and answer as the example's handler, but no
//! claim and no record, so a retried debit debits twice here.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use idem_examples::payments::{
    debit_answer, invalid_account, invalid_amount, pay_provider, App, Debit, MAX_BODY,
};

/// The debit route without idem, with the example's layers.
pub(crate) fn router(app: App) -> Router {
    Router::new()
        .route("/accounts/{id}/debits", post(debit))
        .with_state(app)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(idem_axum::problem_json))
}

/// The example's debit handler body, without idem.
async fn debit(State(app): State<App>, Path(id): Path<String>, Json(req): Json<Debit>) -> Response {
    debit_once(&app, id, &req, next_debit_id()).await
}

/// A debit id without a record to name it by.
pub(crate) fn next_debit_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("dbt_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Checks, pays the provider, moves the money and answers.
pub(crate) async fn debit_once(app: &App, id: String, req: &Debit, debit_id: String) -> Response {
    if let Some(r) = invalid_account(&id).or_else(|| invalid_amount(req)) {
        return r;
    }
    pay_provider(app).await;
    let result = app.ledger.debit(&id, req.amount).await;
    debit_answer(&debit_id, &id, req.amount, result)
}
