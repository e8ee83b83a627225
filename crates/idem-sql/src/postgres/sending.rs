//! How the store's statements run: bound to their parameters and prepared
//! once per connection (the extended protocol), or, behind a transaction
//! pooler, with the parameters written into the text as literals and sent
//! as one simple query.
//!
//! Why literals behind a pooler: PgBouncer in transaction mode hands the
//! server connection to another client as soon as the server is idle. A
//! named prepared statement then lives on a connection the next statement
//! may not get, and even an unnamed one is unsafe: sqlx sends `Parse` and
//! `Describe`, waits for the server (which is then idle, so the pooler lets
//! the connection go), and only then `Bind`, which may land on another
//! client's connection, on *its* unnamed statement. A simple query is one
//! message and one round trip, and leaves nothing behind. Every parameter
//! is a byte string, an integer or a boolean that the store itself makes,
//! written as a hex `bytea` literal or digits: nothing a caller sends is
//! ever spliced into SQL as text.

use std::fmt::Write as _;
use std::sync::Arc;

use sqlx::postgres::{PgQueryResult, PgRow};
use sqlx::{AssertSqlSafe, Executor, Postgres};

/// A statement's parameter, `$1` for the first.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    Bytes(&'a [u8]),
    Int(i64),
    Bool(bool),
}

/// `statement` with `$n` replaced by the literal of `params[n - 1]`.
pub(crate) fn inline(statement: &str, params: &[Param<'_>]) -> String {
    let extra: usize = params
        .iter()
        .map(|p| match p {
            Param::Bytes(b) => 2 * b.len() + 12,
            Param::Int(_) | Param::Bool(_) => 20,
        })
        .sum();
    let mut out = String::with_capacity(statement.len() + extra);
    let mut rest = statement;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let n: usize = rest[at + 1..at + 1 + digits].parse().unwrap_or(0);
        match n.checked_sub(1).and_then(|i| params.get(i)) {
            Some(param) => literal(&mut out, *param),
            // Not a parameter (`$` in the text, none of ours has one): kept.
            None => out.push_str(&rest[at..at + 1 + digits]),
        }
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    out
}

fn literal(out: &mut String, param: Param<'_>) {
    match param {
        Param::Bytes(bytes) => {
            out.push_str("'\\x");
            for b in bytes {
                let _ = write!(out, "{b:02x}");
            }
            out.push_str("'::bytea");
        }
        Param::Int(n) => {
            let _ = write!(out, "{n}::bigint");
        }
        Param::Bool(b) => out.push_str(if b { "true" } else { "false" }),
    }
}

fn bound<'q>(
    statement: &Arc<str>,
    params: &[Param<'q>],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    let mut q = sqlx::query(AssertSqlSafe(Arc::clone(statement)));
    for param in params {
        q = match *param {
            Param::Bytes(b) => q.bind(b),
            Param::Int(n) => q.bind(n),
            Param::Bool(b) => q.bind(b),
        };
    }
    q
}

/// Runs `statement` with `params` and returns its row, if any.
pub(crate) async fn fetch_optional<'e, E>(
    executor: E,
    bind: bool,
    statement: &Arc<str>,
    params: &[Param<'_>],
) -> Result<Option<PgRow>, sqlx::Error>
where
    E: Executor<'e, Database = Postgres>,
{
    if bind {
        bound(statement, params).fetch_optional(executor).await
    } else {
        sqlx::raw_sql(AssertSqlSafe(inline(statement, params)))
            .fetch_optional(executor)
            .await
    }
}

/// Runs `statement` with `params` and returns its one row.
pub(crate) async fn fetch_one<'e, E>(
    executor: E,
    bind: bool,
    statement: &Arc<str>,
    params: &[Param<'_>],
) -> Result<PgRow, sqlx::Error>
where
    E: Executor<'e, Database = Postgres>,
{
    if bind {
        bound(statement, params).fetch_one(executor).await
    } else {
        sqlx::raw_sql(AssertSqlSafe(inline(statement, params)))
            .fetch_one(executor)
            .await
    }
}

/// Runs `statement` with `params` for its effect.
pub(crate) async fn execute<'e, E>(
    executor: E,
    bind: bool,
    statement: &Arc<str>,
    params: &[Param<'_>],
) -> Result<PgQueryResult, sqlx::Error>
where
    E: Executor<'e, Database = Postgres>,
{
    if bind {
        bound(statement, params).execute(executor).await
    } else {
        sqlx::raw_sql(AssertSqlSafe(inline(statement, params)))
            .execute(executor)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_literals_and_nothing_else_changes() {
        let sql = "UPDATE t SET a = $3, b = $1 WHERE id = $1 AND f = $2 AND x = $10 AND y = 'a$'";
        let out = inline(
            sql,
            &[
                Param::Bytes(&[0, 0xab, 0xff]),
                Param::Bool(true),
                Param::Int(-7),
            ],
        );
        assert_eq!(
            out,
            "UPDATE t SET a = -7::bigint, b = '\\x00abff'::bytea WHERE id = '\\x00abff'::bytea \
             AND f = true AND x = $10 AND y = 'a$'"
        );
    }
}
