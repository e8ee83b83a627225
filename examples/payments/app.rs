//! The payments service: accounts with balances, and idempotent debits.
//!
//! `GET /accounts/{id}` answers the balance (an account is opened with 10000
//! on first use); `POST /accounts/{id}/debits` with an `Idempotency-Key` and
//! `{"amount": N}` debits it once per key, whatever the client retries.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, FromRef, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::Engine;

use crate::provider::ProviderClient;
use serde::{Deserialize, Serialize};

/// The largest amount a debit may ask for: balances are 64-bit signed
/// integers in PostgreSQL.
pub const MAX_AMOUNT: u64 = i64::MAX as u64;

/// The largest request body the service reads (the README's 1 MiB); a larger
/// one is refused with 413 before any handler runs.
pub const MAX_BODY: usize = 1 << 20;

pub use crate::ledger::{Commit, Ledger, LedgerError, LedgerTx, Respond, OPENING_BALANCE};
pub use crate::memory_ledger::MemoryLedger;
pub use crate::pg_ledger::PgLedger;
pub use crate::redis_ledger::RedisLedger;

/// The service's state.
#[derive(Clone, FromRef)]
pub struct App {
    /// Runs each debit once per key.
    pub engine: Engine,
    /// The balances.
    pub ledger: Arc<dyn Ledger>,
    /// A simulated delay inside each debit, after the provider's charge.
    pub debit_delay: Duration,
    /// The payment provider each debit charges through, if any
    /// (`PROVIDER_URL`).
    pub provider: Option<ProviderClient>,
}

/// A debit request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Debit {
    /// Minor units to debit; at least 1.
    pub amount: u64,
}

/// The receipt of a debit.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Unique per debit: the record's address and the claim's fencing token.
    pub debit_id: String,
    /// The account debited.
    pub account: String,
    /// The amount debited.
    pub amount: u64,
    /// The balance after the debit.
    pub balance: u64,
}

/// An account and its balance.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The account id.
    pub id: String,
    /// Its balance.
    pub balance: u64,
}

/// The routes. Every error they answer, the extractors' and the router's
/// included, is `application/problem+json` with its own `type`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/accounts/{id}", get(account))
        .route("/accounts/{id}/debits", post(debit))
        .with_state(app)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(idem_axum::problem_json))
}

fn problem(status: StatusCode, slug: &str, title: &str, detail: &str) -> Response {
    let body = serde_json::json!({
        "type": format!("urn:payments:problem:{slug}"),
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// `None` if the id is well formed, else the 400 answer.
pub fn invalid_account(id: &str) -> Option<Response> {
    if !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return None;
    }
    Some(problem(
        StatusCode::BAD_REQUEST,
        "bad-account",
        "Account id is malformed",
        "an account id has 1 to 64 letters, digits, `-` or `_`",
    ))
}

async fn account(State(app): State<App>, Path(id): Path<String>) -> Response {
    if let Some(r) = invalid_account(&id) {
        return r;
    }
    match app.ledger.balance(&id).await {
        Ok(balance) => Json(Account { id, balance }).into_response(),
        Err(e) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "ledger-unavailable",
            "Ledger unavailable",
            &e.to_string(),
        ),
    }
}

/// `POST /accounts/{id}/debits`: debits once per `Idempotency-Key`. The key
/// is scoped by the account, so the same key on two accounts is two debits.
#[idempotent(ttl = "24h", scope = "account", claim = claim)]
async fn debit(
    State(app): State<App>,
    Path(account): Path<String>,
    Json(req): Json<Debit>,
) -> Response {
    if let Some(r) = invalid_account(&account).or_else(|| invalid_amount(&req)) {
        return r;
    }
    // A fencing token is unique only within its record; with the record's
    // address it names this debit and no other.
    let debit_id = format!(
        "dbt_{}_{}",
        &claim.record_id().to_hex()[..16],
        claim.fencing_token()
    );
    let amount = req.amount;
    let answer = |result| debit_answer(&debit_id, &account, amount, result);
    if let Some(provider) = &app.provider {
        // Nothing is charged for a debit the ledger refuses.
        match app.ledger.balance(&account).await {
            Ok(balance) if balance < amount => {
                return answer(Err(LedgerError::InsufficientFunds { balance, amount }));
            }
            Ok(_) => {}
            Err(e) => return answer(Err(e)),
        }
        // The charge's key is the claim's downstream key, which the
        // provider client derives from the claim this debit runs under: the
        // same for every attempt at this debit, so a takeover's repeat is
        // charged once.
        if let Err(e) = provider.charge(&account, amount).await {
            // Whether it charged is unknown: 503 is not recorded, the claim
            // goes, and the retry charges again with the same key.
            return problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "provider-unavailable",
                "Payment provider unavailable",
                &e.to_string(),
            );
        }
    }
    pay_provider(&app).await;
    // Every ledger commits the debit with its recorded answer, and only
    // while the claim holds.
    app.ledger
        .debit_and_record(&account, amount, &claim, &answer)
        .await
}

/// `None` if the amount is in range, else the 400 answer.
pub fn invalid_amount(req: &Debit) -> Option<Response> {
    if req.amount == 0 || req.amount > MAX_AMOUNT {
        return Some(problem(
            StatusCode::BAD_REQUEST,
            "bad-amount",
            "Amount is out of range",
            &format!("send an amount from 1 to {MAX_AMOUNT}"),
        ));
    }
    None
}

/// The slow part of a debit (a payment provider without `PROVIDER_URL`, or
/// the rest of the work after the charge): `DEBIT_DELAY_MS`.
pub async fn pay_provider(app: &App) {
    if !app.debit_delay.is_zero() {
        tokio::time::sleep(app.debit_delay).await;
    }
}

/// The answer to a debit: 201 with the receipt, 402 for insufficient funds
/// (recorded and replayed like a success), 503 if the ledger failed (not
/// recorded: the claim is released and a retry debits).
pub fn debit_answer(
    debit_id: &str,
    account: &str,
    amount: u64,
    result: Result<u64, LedgerError>,
) -> Response {
    match result {
        Ok(balance) => (
            StatusCode::CREATED,
            Json(Receipt {
                debit_id: debit_id.to_owned(),
                account: account.to_owned(),
                amount,
                balance,
            }),
        )
            .into_response(),
        Err(e @ LedgerError::InsufficientFunds { .. }) => problem(
            StatusCode::PAYMENT_REQUIRED,
            "insufficient-funds",
            "Insufficient funds",
            &e.to_string(),
        ),
        Err(e) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "ledger-unavailable",
            "Ledger unavailable",
            &e.to_string(),
        ),
    }
}
