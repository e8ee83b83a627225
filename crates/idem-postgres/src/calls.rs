//! How each store call runs its statement and reads the answer: one
//! function a call, on the pool or on the caller's transaction. The
//! statements themselves are `sql.rs`; how they are sent, `statement.rs`.

use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::{
    Begin, FencingToken, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, StoreError,
};
use sqlx::{PgConnection, Row};

use crate::sql::{Sql, FORMAT};
use crate::statement::{self, Param};

/// Claims `id` for `fingerprint` (machine rows: begin).
pub(crate) async fn begin(
    pool: &sqlx::PgPool,
    sql: &Sql,
    id: &RecordId,
    fingerprint: &Fingerprint,
    lease: Duration,
) -> Result<Begin, StoreError> {
    // Zero rows only when a concurrent first insert of the same key
    // committed between this statement's snapshot and its insert: run again.
    for _ in 0..5 {
        let row = statement::fetch_optional(
            pool,
            sql.persistent,
            &sql.begin,
            &[
                Param::Bytes(&id.as_bytes()[..]),
                Param::Bytes(&fingerprint.as_bytes()[..]),
                Param::Int(us(lease)),
            ],
        )
        .await
        .map_err(|e| db_error("begin", e))?;
        let Some(row) = row else { continue };
        let get = |e: sqlx::Error| StoreError::corrupt(format!("postgres begin: {e}"));
        let kind: String = row.try_get("kind").map_err(get)?;
        let token: i64 = row.try_get("token").map_err(get)?;
        newer(row.try_get("format").map_err(get)?)?;
        return match kind.as_str() {
            "A" => Ok(Begin::Acquired(Lease {
                token: FencingToken(u64::try_from(token).unwrap_or(0)),
                duration: lease,
            })),
            "I" => {
                let left: i64 = row.try_get("left_us").map_err(get)?;
                Ok(Begin::InFlight {
                    retry_after: Duration::from_micros(u64::try_from(left).unwrap_or(0)),
                })
            }
            "R" => {
                let outcome: Option<Vec<u8>> = row.try_get("outcome").map_err(get)?;
                outcome
                    .map(|o| Begin::Replay(Outcome::new(o)))
                    .ok_or_else(|| {
                        StoreError::corrupt("postgres begin: completed record without outcome")
                    })
            }
            "M" => Ok(Begin::Mismatch),
            "E" => Ok(Begin::Expired),
            other => Err(StoreError::corrupt(format!(
                "postgres begin: unexpected kind {other}"
            ))),
        };
    }
    Err(StoreError::unavailable(
        "postgres begin",
        "the record changed under five attempts in a row",
    ))
}

/// Runs a statement that changes `id` only while `lease` is its live claim
/// (renew): `LeaseLost` if it changed nothing.
pub(crate) async fn fenced_update(
    pool: &sqlx::PgPool,
    sql: &Sql,
    what: &str,
    statement: &Arc<str>,
    id: &RecordId,
    lease: &Lease,
    extra: Option<i64>,
) -> Result<(), StoreError> {
    let params = [
        Param::Bytes(&id.as_bytes()[..]),
        Param::Int(token(lease)),
        Param::Int(extra.unwrap_or(0)),
    ];
    let params = if extra.is_some() {
        &params[..]
    } else {
        &params[..2]
    };
    let done = statement::execute(pool, sql.persistent, statement, params)
        .await
        .map_err(|e| db_error(what, e))?;
    if done.rows_affected() == 1 {
        Ok(())
    } else {
        Err(StoreError::lease_lost())
    }
}

pub(crate) fn db_error(what: &str, e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        if db.code().as_deref() == Some("42P01") {
            return StoreError::corrupt(format!(
                "postgres {what}: the records table does not exist; run PgStore::migrate first"
            ));
        }
    }
    StoreError::unavailable(format!("postgres {what} failed"), e)
}

pub(crate) fn us(d: Duration) -> i64 {
    i64::try_from(micros(d)).unwrap_or(i64::MAX)
}

pub(crate) fn token(lease: &Lease) -> i64 {
    i64::try_from(lease.token.0).unwrap_or(i64::MAX)
}

/// Completes a record held by `lease` with `outcome` on `conn` (the pool's
/// connection, or the operation's transaction).
pub(crate) async fn complete(
    conn: &mut PgConnection,
    sql: &Sql,
    id: &RecordId,
    lease: &Lease,
    outcome: &Outcome,
    ttl: Duration,
) -> Result<(), StoreError> {
    let row = statement::fetch_one(
        &mut *conn,
        sql.persistent,
        &sql.complete,
        &[
            Param::Bytes(&id.as_bytes()[..]),
            Param::Int(token(lease)),
            Param::Int(us(ttl)),
            Param::Bytes(outcome.as_bytes()),
        ],
    )
    .await
    .map_err(|e| db_error("complete", e))?;
    let changed: i64 = row.try_get(0).map_err(|e| db_error("complete", e))?;
    if changed == 1 {
        return Ok(());
    }
    // Rare: completing again with the token that completed it is a no-op.
    let row = statement::fetch_one(
        &mut *conn,
        sql.persistent,
        &sql.completed_by,
        &[Param::Bytes(&id.as_bytes()[..]), Param::Int(token(lease))],
    )
    .await
    .map_err(|e| db_error("complete", e))?;
    let done: bool = row.try_get(0).map_err(|e| db_error("complete", e))?;
    if done {
        Ok(())
    } else {
        Err(StoreError::lease_lost())
    }
}

/// The live record `id`, for operators.
pub(crate) async fn inspect(
    pool: &sqlx::PgPool,
    sql: &Sql,
    id: &RecordId,
) -> Result<Option<RecordInfo>, StoreError> {
    let row = statement::fetch_optional(
        pool,
        sql.persistent,
        &sql.inspect,
        &[Param::Bytes(&id.as_bytes()[..])],
    )
    .await
    .map_err(|e| db_error("inspect", e))?;
    let Some(row) = row else { return Ok(None) };
    let get = |e: sqlx::Error| StoreError::corrupt(format!("postgres inspect: {e}"));
    let fingerprint: Vec<u8> = row.try_get("fingerprint").map_err(get)?;
    newer(row.try_get("format").map_err(get)?)?;
    RecordInfo::from_columns(
        &fingerprint,
        row.try_get("token").map_err(get)?,
        row.try_get("completed").map_err(get)?,
        row.try_get("outcome").map_err(get)?,
        row.try_get("left_us").map_err(get)?,
    )
    .map(Some)
    .map_err(|what| StoreError::corrupt(format!("postgres inspect: {what}")))
}

/// Refuses a row of a format newer than this version's.
fn newer(format: i16) -> Result<(), StoreError> {
    StoreError::refuse_newer_format("the PostgreSQL record", format, FORMAT)
}

/// Ends the live record `id` (an in-flight one only if `force`).
pub(crate) async fn remove(
    pool: &sqlx::PgPool,
    sql: &Sql,
    id: &RecordId,
    force: bool,
) -> Result<Removal, StoreError> {
    let row = statement::fetch_one(
        pool,
        sql.persistent,
        &sql.remove,
        &[Param::Bytes(&id.as_bytes()[..]), Param::Bool(force)],
    )
    .await
    .map_err(|e| db_error("remove", e))?;
    let get = |e: sqlx::Error| StoreError::corrupt(format!("postgres remove: {e}"));
    let ended: i64 = row.try_get("ended").map_err(get)?;
    let live: i64 = row.try_get("live").map_err(get)?;
    newer(row.try_get("format").map_err(get)?)?;
    Ok(match (ended, live) {
        (0, 0) => Removal::Absent,
        (0, _) => Removal::InFlight,
        _ => Removal::Removed,
    })
}

/// Ends the claim `lease` on `id`, waking its waiters if any marked it.
pub(crate) async fn release(
    pool: &sqlx::PgPool,
    sql: &Sql,
    id: &RecordId,
    lease: &Lease,
) -> Result<(), StoreError> {
    let row = statement::fetch_one(
        pool,
        sql.persistent,
        &sql.release,
        &[Param::Bytes(&id.as_bytes()[..]), Param::Int(token(lease))],
    )
    .await
    .map_err(|e| db_error("release", e))?;
    let changed: i64 = row.try_get(0).map_err(|e| db_error("release", e))?;
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::lease_lost())
    }
}

/// Marks `id` as waited on, if it is still in flight: `false` if it has
/// changed already.
pub(crate) async fn watch(
    pool: &sqlx::PgPool,
    sql: &Sql,
    id: &RecordId,
) -> Result<bool, StoreError> {
    let marked = statement::execute(
        pool,
        sql.persistent,
        &sql.watch,
        &[Param::Bytes(&id.as_bytes()[..])],
    )
    .await
    .map_err(|e| db_error("watch", e))?;
    Ok(marked.rows_affected() == 1)
}

/// Deletes up to `limit` records that are no longer live and whose token
/// the clock has passed ([`Record::droppable`](idem_core::machine::Record::droppable)).
/// Deletes up to `limit` purgeable rows whose deadline is `from_us` or
/// later; how many, and the last deadline deleted (µs since the epoch, 0
/// if none).
pub(crate) async fn purge(
    pool: &sqlx::PgPool,
    sql: &Sql,
    limit: u32,
    from_us: i64,
) -> Result<(u64, i64), StoreError> {
    let row = statement::fetch_one(
        pool,
        sql.persistent,
        &sql.purge,
        &[Param::Int(i64::from(limit)), Param::Int(from_us)],
    )
    .await
    .map_err(|e| db_error("purge", e))?;
    let get = |e: sqlx::Error| StoreError::corrupt(format!("postgres purge: {e}"));
    let purged: i64 = row.try_get("purged").map_err(get)?;
    let last: i64 = row.try_get("last_us").map_err(get)?;
    Ok((u64::try_from(purged).unwrap_or(0), last))
}
