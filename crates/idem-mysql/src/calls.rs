//! How each store call runs its statement and reads the answer: one
//! function a call, on the pool or on the caller's transaction. The
//! statements themselves are `sql.rs`.

use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::{
    Begin, FencingToken, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, StoreError,
};
use sqlx::mysql::{MySqlArguments, MySqlPool};
use sqlx::{AssertSqlSafe, MySql, MySqlConnection, Row};

use crate::db_error::{db_error, error_number, number};
use crate::sql::{Sql, FORMAT};

/// How many times a claim is sent again when the server rolled it back as
/// a deadlock, or the record ended between the claim and its read.
const BEGIN_ATTEMPTS: usize = 5;

fn prepared<'q>(statement: &Arc<str>) -> sqlx::query::Query<'q, MySql, MySqlArguments> {
    sqlx::query(AssertSqlSafe(Arc::clone(statement)))
}

/// Claims `id` for `fingerprint` (machine rows: begin): one statement for
/// a first request (the claim, whose insert id is the token it granted),
/// and a read after it when the record was live or traced, to tell in
/// flight, replay, expired and mismatch apart.
pub(crate) async fn begin(
    pool: &MySqlPool,
    sql: &Sql,
    id: &RecordId,
    fingerprint: &Fingerprint,
    lease: Duration,
) -> Result<Begin, StoreError> {
    for _ in 0..BEGIN_ATTEMPTS {
        let claimed = prepared(&sql.claim)
            .bind(&id.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(us(lease))
            .bind(&fingerprint.as_bytes()[..])
            .bind(us(lease))
            .execute(pool)
            .await;
        let token = match claimed {
            Ok(done) => done.last_insert_id(),
            // Rolled back whole: nothing was claimed. Send it again.
            Err(e) if error_number(&e) == Some(number::DEADLOCK) => continue,
            Err(e) => return Err(db_error("begin", e)),
        };
        if token != 0 {
            return Ok(Begin::Acquired(Lease {
                token: FencingToken(token),
                duration: lease,
            }));
        }
        let row = prepared(&sql.claimed)
            .bind(&fingerprint.as_bytes()[..])
            .bind(&fingerprint.as_bytes()[..])
            .bind(&id.as_bytes()[..])
            .fetch_optional(pool)
            .await
            .map_err(|e| db_error("begin", e))?;
        // Ended (or purged) between the claim and its read: claim again.
        let Some(row) = row else { continue };
        let get = |e: sqlx::Error| db_error("begin", e);
        newer(row.try_get("format").map_err(get)?)?;
        if row.try_get::<i64, _>("same").map_err(get)? == 0 {
            return Ok(Begin::Mismatch);
        }
        // expired, traced, same fingerprint | begin -> Expired.
        if row.try_get::<i64, _>("live").map_err(get)? == 0 {
            return Ok(Begin::Expired);
        }
        if !row.try_get::<bool, _>("completed").map_err(get)? {
            let left: i64 = row.try_get("left_us").map_err(get)?;
            return Ok(Begin::InFlight {
                retry_after: Duration::from_micros(u64::try_from(left).unwrap_or(0)),
            });
        }
        let outcome: Option<Vec<u8>> = row.try_get("outcome").map_err(get)?;
        return outcome
            .map(|o| Begin::Replay(Outcome::new(o)))
            .ok_or_else(|| StoreError::corrupt("mysql begin: a completed record without outcome"));
    }
    Err(StoreError::unavailable_because(format!(
        "mysql begin: the record changed (or the server rolled the claim back as a deadlock) \
         {BEGIN_ATTEMPTS} times in a row; nothing was claimed"
    )))
}

/// Completes a record held by `lease` with `outcome` on `conn` (the pool's
/// connection, or the operation's transaction).
pub(crate) async fn complete(
    conn: &mut MySqlConnection,
    sql: &Sql,
    id: &RecordId,
    lease: &Lease,
    outcome: &Outcome,
    ttl: Duration,
) -> Result<(), StoreError> {
    let done = prepared(&sql.complete)
        .bind(us(ttl))
        .bind(outcome.as_bytes())
        .bind(&id.as_bytes()[..])
        .bind(token(lease))
        .execute(&mut *conn)
        .await
        .map_err(|e| db_error("complete", e))?;
    if done.rows_affected() == 1 {
        return Ok(());
    }
    // Rare: completing again with the token that completed it is a no-op.
    let row = prepared(&sql.completed_by)
        .bind(&id.as_bytes()[..])
        .bind(token(lease))
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| db_error("complete", e))?;
    let done: i64 = row.try_get(0).map_err(|e| db_error("complete", e))?;
    if done == 1 {
        Ok(())
    } else {
        Err(StoreError::lease_lost())
    }
}

/// Runs a statement that changes `id` only while `lease` is its live claim
/// (release, renew): `LeaseLost` if it changed nothing.
pub(crate) async fn fenced(
    pool: &MySqlPool,
    what: &str,
    statement: &Arc<str>,
    id: &RecordId,
    lease: &Lease,
    duration: Option<Duration>,
) -> Result<(), StoreError> {
    let mut query = prepared(statement);
    if let Some(duration) = duration {
        query = query.bind(us(duration));
    }
    let done = query
        .bind(&id.as_bytes()[..])
        .bind(token(lease))
        .execute(pool)
        .await
        .map_err(|e| db_error(what, e))?;
    if done.rows_affected() == 1 {
        Ok(())
    } else {
        Err(StoreError::lease_lost())
    }
}

/// The live record `id`, for operators.
pub(crate) async fn inspect(
    pool: &MySqlPool,
    sql: &Sql,
    id: &RecordId,
) -> Result<Option<RecordInfo>, StoreError> {
    let row = prepared(&sql.inspect)
        .bind(&id.as_bytes()[..])
        .fetch_optional(pool)
        .await
        .map_err(|e| db_error("inspect", e))?;
    let Some(row) = row else { return Ok(None) };
    let get = |e: sqlx::Error| db_error("inspect", e);
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
    .map_err(|what| StoreError::corrupt(format!("mysql inspect: {what}")))
}

/// Refuses a row of a format newer than this version's.
fn newer(format: i16) -> Result<(), StoreError> {
    StoreError::refuse_newer_format("the MySQL record", format, FORMAT)
}

/// Ends the live record `id` (an in-flight one only if `force`). Two
/// statements: the end, and, when it changed nothing, whether the record is
/// live (in flight, refused) or not (absent); each answer is what the
/// record was at one of the two.
pub(crate) async fn remove(
    pool: &MySqlPool,
    sql: &Sql,
    id: &RecordId,
    force: bool,
) -> Result<Removal, StoreError> {
    let ended = prepared(&sql.remove)
        .bind(&id.as_bytes()[..])
        .bind(force)
        .execute(pool)
        .await
        .map_err(|e| db_error("remove", e))?;
    if ended.rows_affected() == 1 {
        return Ok(Removal::Removed);
    }
    let row = prepared(&sql.live)
        .bind(&id.as_bytes()[..])
        .fetch_one(pool)
        .await
        .map_err(|e| db_error("remove", e))?;
    let live: i64 = row.try_get(0).map_err(|e| db_error("remove", e))?;
    newer(row.try_get(1).map_err(|e| db_error("remove", e))?)?;
    Ok(if live == 0 {
        Removal::Absent
    } else {
        Removal::InFlight
    })
}

/// Deletes up to `limit` records that are no longer live and whose token
/// the clock has passed ([`Record::droppable`](idem_core::machine::Record::droppable)).
pub(crate) async fn purge(pool: &MySqlPool, sql: &Sql, limit: u32) -> Result<u64, StoreError> {
    prepared(&sql.purge)
        .bind(limit)
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
        .map_err(|e| db_error("purge", e))
}

pub(crate) fn us(d: Duration) -> i64 {
    i64::try_from(micros(d)).unwrap_or(i64::MAX)
}

fn token(lease: &Lease) -> i64 {
    i64::try_from(lease.token.0).unwrap_or(i64::MAX)
}
