//! The payment provider the payments service charges through: a second
//! small service, itself idempotent, as a real provider is (Stripe and its
//! peers deduplicate on an idempotency key). The payments service sends
//! each debit's charge with its claim's downstream key, the same for every
//! attempt at the debit: a charge repeated by an attempt that took the debit
//! over (its holder stalled past its lease) is answered with the first
//! charge, and the card is charged once.
//!
//! `POST /charges` with an `Idempotency-Key` and `{"account": "...",
//! "amount": N}` answers 201 with the charge; `GET /charges/count` answers
//! how many charges were made (each key once).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_client::{CallSite, IdempotentRetries, RetryPolicy};
use idem_core::Engine;
use reqwest_middleware::ClientWithMiddleware;
use serde::{Deserialize, Serialize};

/// The charges made, one per key.
#[derive(Clone, Debug, Default)]
pub struct Charges(Arc<AtomicU64>);

impl Charges {
    /// How many charges were made.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The provider's state.
#[derive(Clone, FromRef)]
pub struct Provider {
    /// Runs each charge once per key.
    pub engine: Engine,
    /// What was charged.
    pub charges: Charges,
}

/// A charge asked for.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChargeRequest {
    /// The account charged.
    pub account: String,
    /// Minor units.
    pub amount: u64,
}

/// A charge made.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// Unique per charge.
    pub charge_id: String,
    /// The account charged.
    pub account: String,
    /// Minor units.
    pub amount: u64,
}

/// The provider's routes; every error is problem+json.
pub fn provider_router(provider: Provider) -> Router {
    Router::new()
        .route("/charges", post(charge))
        .route("/charges/count", get(count))
        .with_state(provider)
        .layer(axum::middleware::map_response(idem_axum::problem_json))
}

/// `POST /charges`: charges once per `Idempotency-Key`.
#[idempotent(ttl = "24h", claim = claim)]
async fn charge(State(charges): State<Charges>, Json(req): Json<ChargeRequest>) -> Response {
    let n = charges.0.fetch_add(1, Ordering::SeqCst) + 1;
    let charge = Charge {
        charge_id: format!("ch_{}_{n}", &claim.record_id().to_hex()[..16]),
        account: req.account,
        amount: req.amount,
    };
    (StatusCode::CREATED, Json(charge)).into_response()
}

async fn count(State(charges): State<Charges>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "charges": charges.count() }))
}

/// Why a charge did not go through. Either way the payments service does
/// not know whether the provider charged: it answers 503 and releases the
/// debit's claim, and the retry charges again with the same key, which the
/// provider deduplicates.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider could not be reached or did not answer.
    #[error("the payment provider did not answer: {0}")]
    Unreachable(String),
    /// The provider answered something other than a charge.
    #[error("the payment provider answered {status}: {body}")]
    Refused {
        /// Its status.
        status: u16,
        /// Its body.
        body: String,
    },
}

/// The payments service's side: charges through the provider at `url`,
/// with idem's client. Inside a debit, a charge's key is derived from the
/// debit's claim (`propagate`, call site `charge`): the same for every
/// attempt at the debit, so a takeover's repeated charge is charged once;
/// and the client retries a charge whose answer was lost, with that key.
#[derive(Clone, Debug)]
pub struct ProviderClient {
    http: ClientWithMiddleware,
    url: String,
}

impl ProviderClient {
    /// A client of the provider at `url` (`http://127.0.0.1:3100`, say).
    pub fn new(url: &str) -> Self {
        let policy = RetryPolicy::default()
            .max_attempts(3)
            .deadline(Duration::from_secs(2));
        let http = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(IdempotentRetries::new().propagate(true).policy(policy))
            .build();
        Self {
            http,
            url: url.trim_end_matches('/').to_owned(),
        }
    }

    /// Charges `amount` to `account`; inside a debit, under the key derived
    /// from the debit's claim for the call site `charge`
    /// (`claim.downstream_key("charge")`): the same key charges once.
    pub async fn charge(&self, account: &str, amount: u64) -> Result<Charge, ProviderError> {
        let sent = self
            .http
            .post(format!("{}/charges", self.url))
            .with_extension(CallSite::new("charge"))
            .json(&ChargeRequest {
                account: account.to_owned(),
                amount,
            })
            .send()
            .await
            .map_err(|e| ProviderError::Unreachable(e.to_string()))?;
        let status = sent.status();
        if status == reqwest::StatusCode::CREATED {
            return sent
                .json()
                .await
                .map_err(|e| ProviderError::Unreachable(e.to_string()));
        }
        let body = sent.text().await.unwrap_or_default();
        Err(ProviderError::Refused {
            status: status.as_u16(),
            body,
        })
    }
}
