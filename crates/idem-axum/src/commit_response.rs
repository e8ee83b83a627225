//! `commit_response`: a handler's response recorded in the handler's own
//! database transaction, committed with its writes or not at all.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use idem_core::{Claim, StoreTransaction};

use crate::problem::Problem;
use crate::record::{self, not_recorded, Buffered};
use idem_http::Settings;

tokio::task_local! {
    /// The run of the handler this task is in: its settings, and how the
    /// handler settled its record.
    static RUN: Arc<RunSlot>;
}

/// How a handler settled its claim itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handled {
    /// Its response was recorded in the transaction that committed.
    Recorded,
    /// Whether its writes committed is unknown, or its claim was lost: the
    /// claim is left to its lease.
    Kept,
    /// Nothing of it was committed: the claim can go at once.
    Released,
}

/// What `respond` shares with `commit_response` while a handler runs.
#[derive(Debug)]
pub(crate) struct RunSlot {
    settings: Settings,
    handled: AtomicU8,
}

impl RunSlot {
    pub(crate) fn new(settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            handled: AtomicU8::new(0),
        })
    }

    /// Runs the handler's future in this slot.
    pub(crate) async fn run<F: Future>(self: &Arc<Self>, handler: F) -> F::Output {
        RUN.scope(Arc::clone(self), handler).await
    }

    /// How the handler settled its claim, if it did.
    pub(crate) fn handled(&self) -> Option<Handled> {
        match self.handled.load(Ordering::SeqCst) {
            1 => Some(Handled::Recorded),
            2 => Some(Handled::Kept),
            3 => Some(Handled::Released),
            _ => None,
        }
    }

    fn set(&self, handled: Handled) {
        let n = match handled {
            Handled::Recorded => 1,
            Handled::Kept => 2,
            Handled::Released => 3,
        };
        self.handled.store(n, Ordering::SeqCst);
    }
}

/// Records `response` under `claim` inside `tx`, the handler's own open
/// transaction, commits, and returns the response: the handler's writes and
/// its recorded response commit together, or neither does. Retries replay
/// the response byte for byte, as any recorded one.
///
/// Call it last in an idempotent handler (`#[idempotent(claim = claim)]`, or
/// [`Idempotent::run`](crate::Idempotent::run)) and return what it returns.
/// It applies the route's settings (the record policy and the response body
/// limit), and idem-axum then neither encodes nor records the response again:
///
/// | what happens | the answer | the transaction | the key |
/// | --- | --- | --- | --- |
/// | the response is recorded under the policy | the response | committed with the record | replays it |
/// | the policy does not record it (a 5xx by default) | the response | rolled back | runs again on retry |
/// | the claim was lost (its lease ended, another attempt took over) | 409 `lease-lost` | rolled back | the other attempt's |
/// | the record cannot be written (the database failed) | 503 `store-unavailable` | rolled back | runs again on retry |
/// | the commit fails | 503 `commit-uncertain` | unknown | 409 until the lease ends, then replays if it committed, or runs again |
///
/// A response larger than the body limit is served, and retries get the
/// `response-not-recorded` stand-in (recorded in the transaction), as
/// elsewhere in idem-axum.
///
/// ```no_run
/// use axum::extract::{FromRef, State};
/// use axum::http::StatusCode;
/// use axum::response::Response;
/// use idem_axum::{commit_response, idempotent};
/// use idem_core::Engine;
/// use idem_postgres::PgStore;
///
/// #[derive(Clone, FromRef)]
/// struct App { engine: Engine, store: PgStore }
///
/// #[idempotent(claim = claim)]
/// async fn refund(State(app): State<App>, body: String) -> Response {
///     let Ok(mut tx) = app.store.begin_transaction().await else {
///         return StatusCode::SERVICE_UNAVAILABLE.into_response();
///     };
///     let written = sqlx::query("INSERT INTO refunds (note) VALUES ($1)")
///         .bind(&body)
///         .execute(&mut *tx)
///         .await;
///     let response = match written {
///         Ok(_) => (StatusCode::CREATED, "refunded").into_response(),
///         // A 5xx is not recorded: the transaction rolls back.
///         Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
///     };
///     commit_response(tx, &claim, response).await
/// }
/// # use axum::response::IntoResponse;
/// ```
pub async fn commit_response<T: StoreTransaction>(
    mut tx: T,
    claim: &Claim,
    response: impl IntoResponse,
) -> Response {
    let response = response.into_response();
    let slot = RUN.try_with(Arc::clone).ok();
    let settings = slot.as_ref().map_or_else(Settings::default, |s| s.settings);
    let settle = |handled| {
        if let Some(slot) = &slot {
            slot.set(handled);
        }
    };
    if !settings.record.records(response.status().as_u16()) {
        rollback(tx).await;
        settle(Handled::Released);
        return response;
    }
    let limit = settings.max_response_body;
    let (response, outcome) = match record::buffer(response, limit).await {
        Buffered::Whole(response, outcome) => (response, outcome),
        Buffered::NotRecordable(response) => (response, not_recorded(limit)),
    };
    if let Err(e) = tx.complete(claim, &outcome).await {
        rollback(tx).await;
        if e.is_lease_lost() {
            // Another attempt holds the key now: its outcome, not ours.
            settle(Handled::Kept);
            return Problem::from(idem_http::Problem::lease_lost_rolled_back()).into_response();
        }
        tracing::warn!(target: "idem", record = %claim.record_id(), error = %e, "the response could not be recorded in the transaction; rolled back");
        settle(Handled::Released);
        return Problem::from(idem_http::Problem::not_recorded_rolled_back()).into_response();
    }
    if let Err(e) = tx.commit().await {
        tracing::error!(target: "idem", record = %claim.record_id(), error = %e, "the transaction with the recorded response failed to commit; whether it committed is unknown, so the claim is kept until its lease ends");
        settle(Handled::Kept);
        return Problem::from(idem_http::Problem::commit_uncertain()).into_response();
    }
    settle(Handled::Recorded);
    response
}

async fn rollback<T: StoreTransaction>(tx: T) {
    if let Err(e) = tx.rollback().await {
        // The server rolls back a transaction whose connection is gone.
        tracing::warn!(target: "idem", error = %e, "rollback failed");
    }
}
