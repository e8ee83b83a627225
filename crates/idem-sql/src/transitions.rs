//! What the answers of a dialect's statements mean: the transition table's
//! rows, decided once for every SQL database, and waking this process's
//! waiters after a change.

use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::store::Begin;
use idem_core::{FencingToken, Fingerprint, Lease, Outcome, RecordId, RecordInfo, StoreError};
use sqlx::Pool;

use crate::dialect::{ClaimFound, Columns, Dialect};
use crate::wakes::Wakes;

/// How many times a claim is sent again when the record changed between
/// the claim and its read, or the database rolled the claim back whole.
const CLAIM_ATTEMPTS: usize = 5;

/// Wakes this process's waiters of `id`, with one read of the record.
pub(crate) fn wake<D: Dialect>(pool: &Pool<D>, sql: &Arc<D::Sql>, wakes: &Wakes, id: &RecordId) {
    let (pool, sql, read) = (pool.clone(), Arc::clone(sql), *id);
    wakes.wake(id, move || async move {
        inspect::<D>(&pool, &sql, &read).await.ok().flatten()
    });
}

/// Claims `id` (machine rows: begin), from what the dialect's claim found.
pub(crate) async fn begin<D: Dialect>(
    pool: &Pool<D>,
    sql: &D::Sql,
    id: &RecordId,
    fingerprint: &Fingerprint,
    lease: Duration,
) -> Result<Begin, StoreError> {
    for _ in 0..CLAIM_ATTEMPTS {
        let found = match D::claim(pool, sql, id, fingerprint, us(lease))
            .await
            .map_err(|e| D::error("begin", e))?
        {
            ClaimFound::Again => continue,
            ClaimFound::Granted(token) => {
                return Ok(Begin::Acquired(Lease {
                    token: FencingToken(u64::try_from(token).unwrap_or(0)),
                    duration: lease,
                }))
            }
            ClaimFound::Found(found) => found,
        };
        newer::<D>(found.format)?;
        // in flight, completed or traced, other fingerprint | begin -> Mismatch.
        if !found.same {
            return Ok(Begin::Mismatch);
        }
        // expired, traced, same fingerprint | begin -> Expired.
        if !found.live {
            return Ok(Begin::Expired);
        }
        // in flight, same fingerprint | begin -> InFlight.
        if !found.completed {
            return Ok(Begin::InFlight {
                retry_after: Duration::from_micros(u64::try_from(found.left_us).unwrap_or(0)),
            });
        }
        // completed, same fingerprint | begin -> Replay.
        return found
            .outcome
            .map(|o| Begin::Replay(Outcome::new(o)))
            .ok_or_else(|| {
                StoreError::corrupt(format!(
                    "{} begin: a completed record without outcome",
                    D::STORE
                ))
            });
    }
    Err(StoreError::unavailable_because(format!(
        "{} begin: the record changed (or the database rolled the claim back) {CLAIM_ATTEMPTS} \
         times in a row; nothing was claimed",
        D::STORE
    )))
}

/// Completes a record held by `lease` with `outcome` on `conn` (a pool's
/// connection, or the operation's transaction).
pub(crate) async fn complete_on<D: Dialect>(
    conn: &mut D::Connection,
    sql: &D::Sql,
    id: &RecordId,
    lease: &Lease,
    outcome: &Outcome,
    ttl: Duration,
) -> Result<(), StoreError> {
    let error = |e| D::error("complete", e);
    // in flight, holder's token | complete -> Completed.
    if D::complete(
        &mut *conn,
        sql,
        id,
        token(lease),
        us(ttl),
        outcome.as_bytes(),
    )
    .await
    .map_err(error)?
    {
        return Ok(());
    }
    // Rare: completed by the holder's token | complete -> Completed (first
    // outcome kept); anything else | complete -> LeaseLost.
    if D::completed_by(conn, sql, id, token(lease))
        .await
        .map_err(error)?
    {
        Ok(())
    } else {
        Err(StoreError::lease_lost())
    }
}

/// The live record `id`, read from its columns.
pub(crate) async fn inspect<D: Dialect>(
    pool: &Pool<D>,
    sql: &D::Sql,
    id: &RecordId,
) -> Result<Option<RecordInfo>, StoreError> {
    let Some(Columns {
        fingerprint,
        token,
        completed,
        outcome,
        left_us,
        format,
    }) = D::inspect(pool, sql, id)
        .await
        .map_err(|e| D::error("inspect", e))?
    else {
        return Ok(None);
    };
    newer::<D>(format)?;
    RecordInfo::from_columns(&fingerprint, token, completed, outcome, left_us)
        .map(Some)
        .map_err(|what| StoreError::corrupt(format!("{} inspect: {what}", D::STORE)))
}

/// Refuses a row of a format newer than this version's.
pub(crate) fn newer<D: Dialect>(format: i16) -> Result<(), StoreError> {
    // The message is written only for a refusal: every replay passes here.
    if format > D::FORMAT {
        return Err(StoreError::newer_format(
            &format!("the {} record", D::STORE),
            format,
            D::FORMAT,
        ));
    }
    Ok(())
}

pub(crate) fn us(d: Duration) -> i64 {
    i64::try_from(micros(d)).unwrap_or(i64::MAX)
}

pub(crate) fn token(lease: &Lease) -> i64 {
    i64::try_from(lease.token.0).unwrap_or(i64::MAX)
}
