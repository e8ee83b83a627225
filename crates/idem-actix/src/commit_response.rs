//! `commit_response`: a handler's response recorded in the handler's own
//! transaction of its store, committed with its writes, only while its
//! claim holds, or not at all. The same call as idem-axum's.

use actix_web::HttpResponse;
use idem_core::{Claim, CommitError, StoreTransaction};
use idem_http::Problem;

use crate::problem::problem_response;
use crate::respond::Answers;

/// What the transaction read changed before it could commit
/// ([`try_commit_response`]): nothing was applied, and the claim is still
/// held. Read again, recompute the response, and commit a new transaction.
#[derive(Debug)]
pub struct Conflict(pub CommitError);

/// Records `response` under `claim` inside `tx`, the handler's own open
/// transaction (PostgreSQL, Redis or memory), commits, and returns the
/// response: the handler's writes and its recorded response take effect
/// together, only while the claim holds, or not at all. Call it last in an
/// idempotent handler (`#[idempotent(claim = claim)]`, or behind the
/// [`Idempotency`](crate::Idempotency) middleware with the claim from the
/// request's extensions) and return what it returns; the route's record
/// policy and body limit apply, and nothing is encoded or recorded again.
///
/// | what happens | the answer | the transaction | the key |
/// | --- | --- | --- | --- |
/// | the response is recorded under the policy | the response | committed with the record | replays it |
/// | the policy does not record it (a 5xx by default) | the response | rolled back | runs again on retry |
/// | the claim was lost (its lease ended, another attempt took over, a forced removal) | 409 `lease-lost` | rolled back | the other attempt's |
/// | the record cannot be written, or what an optimistic transaction read changed | 503 `store-unavailable` | rolled back | runs again on retry |
/// | the commit's answer is lost | 503 `commit-uncertain` | unknown | 409 until the lease ends, then replays if it committed, or runs again |
///
/// For an optimistic store's transaction (Redis, memory), prefer
/// [`try_commit_response`], which hands a conflict back so the handler reads
/// again instead of answering 503.
pub async fn commit_response<T: StoreTransaction>(
    tx: T,
    claim: &Claim,
    response: HttpResponse,
) -> HttpResponse {
    if let Ok(response) = try_commit_response(tx, claim, response).await {
        response
    } else {
        // A conflict: nothing was applied, so the claim goes, and the
        // retry runs again.
        claim.give_up();
        problem_response(&Problem::not_recorded_rolled_back())
    }
}

/// [`commit_response`] for an optimistic store's transaction (Redis,
/// memory): on [`Conflict`] nothing was applied and the claim is still
/// held, so read again, recompute the response and commit a new
/// transaction.
pub async fn try_commit_response<T: StoreTransaction>(
    tx: T,
    claim: &Claim,
    response: HttpResponse,
) -> Result<HttpResponse, Conflict> {
    let answers = Answers(idem_http::current_settings());
    match idem_http::adapter::commit_answer(&answers, tx, claim, Ok(response)).await {
        Ok(answer) => Ok(answer.unwrap_or_else(|e| e.error_response())),
        Err(e) => Err(Conflict(e)),
    }
}
