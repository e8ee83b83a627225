//! The calls of a dialect whose every statement is prepared once per
//! connection and bound to `?` parameters (MySQL, SQLite), written once.
//!
//! Each is one statement, bound in one order for every such dialect (the
//! dialect's statements number or place their parameters to match):
//!
//! | call | parameters | answer |
//! | --- | --- | --- |
//! | `complete` | lease's TTL (µs), outcome, id, token | one row changed |
//! | `completed_by` | id, token | a count, 1 |
//! | `release` | id, token | one row changed |
//! | `renew` | lease (µs), id, token | one row changed |
//! | `inspect` | id | the record's columns, if live |
//! | `remove` | id, force | one row changed; if none, `live` |
//! | `live` | id | a count of live records, and the format |
//! | `purge` | limit | the rows deleted |
//!
//! A macro rather than generic functions: the dialects' trait impls call
//! inherent methods of their own connection and result types
//! (`rows_affected`), which sqlx names in no trait.

use std::sync::Arc;

/// The statements of the calls below, in the dialect's `Sql` as `calls`.
#[derive(Debug)]
pub(crate) struct PreparedCalls {
    pub(crate) complete: Arc<str>,
    pub(crate) completed_by: Arc<str>,
    pub(crate) release: Arc<str>,
    pub(crate) renew: Arc<str>,
    pub(crate) inspect: Arc<str>,
    pub(crate) remove: Arc<str>,
    pub(crate) live: Arc<str>,
    pub(crate) purge: Arc<str>,
}

/// The [`Dialect`](crate::Dialect) calls `complete`, `completed_by`,
/// `release`, `renew`, `inspect`, `remove` and `purge`, inside the
/// dialect's `impl Dialect` block, on the [`PreparedCalls`] its `Sql` holds
/// as `calls`.
macro_rules! prepared_calls {
    () => {
        async fn complete(
            conn: &mut <Self as sqlx::Database>::Connection,
            sql: &Self::Sql,
            id: &idem_core::RecordId,
            token: i64,
            ttl_us: i64,
            outcome: &[u8],
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(
                &sql.calls.complete,
            )))
            .bind(ttl_us)
            .bind(outcome)
            .bind(&id.as_bytes()[..])
            .bind(token)
            .execute(conn)
            .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn completed_by(
            conn: &mut <Self as sqlx::Database>::Connection,
            sql: &Self::Sql,
            id: &idem_core::RecordId,
            token: i64,
        ) -> Result<bool, sqlx::Error> {
            let row = sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(
                &sql.calls.completed_by,
            )))
            .bind(&id.as_bytes()[..])
            .bind(token)
            .fetch_one(conn)
            .await?;
            $crate::RecordRow::one(&row)
        }

        async fn release(
            pool: &sqlx::Pool<Self>,
            sql: &Self::Sql,
            id: &idem_core::RecordId,
            token: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(
                &sql.calls.release,
            )))
            .bind(&id.as_bytes()[..])
            .bind(token)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn renew(
            pool: &sqlx::Pool<Self>,
            sql: &Self::Sql,
            id: &idem_core::RecordId,
            token: i64,
            lease_us: i64,
        ) -> Result<bool, sqlx::Error> {
            let done =
                sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(&sql.calls.renew)))
                    .bind(lease_us)
                    .bind(&id.as_bytes()[..])
                    .bind(token)
                    .execute(pool)
                    .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn inspect(
            pool: &sqlx::Pool<Self>,
            sql: &Self::Sql,
            id: &idem_core::RecordId,
        ) -> Result<Option<$crate::Columns>, sqlx::Error> {
            let row = sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(
                &sql.calls.inspect,
            )))
            .bind(&id.as_bytes()[..])
            .fetch_optional(pool)
            .await?;
            row.as_ref().map($crate::RecordRow::record).transpose()
        }

        /// Two statements: the end, and, when it changed nothing, whether
        /// the record is live (in flight, refused) or not (absent); each
        /// answer is what the record was at one of the two.
        async fn remove(
            pool: &sqlx::Pool<Self>,
            sql: &Self::Sql,
            id: &idem_core::RecordId,
            force: bool,
        ) -> Result<$crate::Ended, sqlx::Error> {
            let ended = sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(
                &sql.calls.remove,
            )))
            .bind(&id.as_bytes()[..])
            .bind(force)
            .execute(pool)
            .await?;
            if ended.rows_affected() == 1 {
                return Ok($crate::Ended::live_one(Self::FORMAT));
            }
            let row =
                sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(&sql.calls.live)))
                    .bind(&id.as_bytes()[..])
                    .fetch_one(pool)
                    .await?;
            $crate::RecordRow::not_ended(&row)
        }

        /// From the oldest: the database removes a deleted row's index
        /// entries itself, so no scan walks past them again.
        async fn purge(
            pool: &sqlx::Pool<Self>,
            sql: &Self::Sql,
            limit: u32,
            _from_us: i64,
        ) -> Result<$crate::Purged, sqlx::Error> {
            let done =
                sqlx::query::<Self>(sqlx::AssertSqlSafe(std::sync::Arc::clone(&sql.calls.purge)))
                    .bind(limit)
                    .execute(pool)
                    .await?;
            Ok($crate::Purged::count(done.rows_affected()))
        }
    };
}

pub(crate) use prepared_calls;
