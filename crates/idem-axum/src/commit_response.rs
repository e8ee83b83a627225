//! `commit_response`: a handler's response recorded in the handler's own
//! database transaction, committed with its writes or not at all.

use axum::response::{IntoResponse, Response};
use idem_core::{Claim, StoreTransaction};

use crate::layer::Axum;
use crate::problem::Problem;
use idem_http::adapter::HttpAnswers;

/// What the transaction read changed before it could commit
/// ([`try_commit_response`]): nothing was applied, and the claim is still
/// held. Read again, recompute the response, and commit a new transaction.
#[derive(Debug)]
pub struct Conflict(pub idem_core::CommitError);

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
    tx: T,
    claim: &Claim,
    response: impl IntoResponse,
) -> Response {
    if let Ok(response) = try_commit_response(tx, claim, response).await {
        response
    } else {
        // A conflict: nothing was applied, so the claim goes, and the
        // retry runs again.
        claim.give_up();
        Problem::from(idem_http::Problem::not_recorded_rolled_back()).into_response()
    }
}

/// [`commit_response`] for an optimistic store's transaction (Redis,
/// memory), whose commit also checks that what the handler read is
/// unchanged: on [`Conflict`] nothing was applied and the claim is still
/// held, so read again, recompute the response and commit a new
/// transaction.
pub async fn try_commit_response<T: StoreTransaction>(
    tx: T,
    claim: &Claim,
    response: impl IntoResponse,
) -> Result<Response, Conflict> {
    let answers = HttpAnswers::<Axum>::new(idem_http::current_settings());
    idem_http::adapter::commit_answer(&answers, tx, claim, response.into_response())
        .await
        .map_err(Conflict)
}
