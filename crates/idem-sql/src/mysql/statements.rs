//! MariaDB's and MySQL's statements, rendered once for a database and
//! table.
//!
//! The clock is the server's: `UTC_TIMESTAMP(6)`, which, like `NOW(6)`, is
//! the time the statement started, the same wherever a statement names it,
//! but unlike `NOW(6)` does not depend on the session's `time_zone` (two
//! instances whose pools set different zones still agree on every deadline).

use std::sync::Arc;

use crate::prepared_calls::PreparedCalls;

/// The server's clock in microseconds since the Unix epoch.
const NOW_US: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// The record format this version writes and reads: the `format` column.
/// A row of a later format (a greater number) is refused as newer, never
/// misread nor taken over.
pub(crate) const FORMAT: i16 = 1;

/// The record may be claimed: of this version's format, not live (none of its deadline is left), and
/// not traced (in flight, or completed and expired longer ago than the
/// trace), `{trace}` the trace in microseconds.
const CLAIMABLE: &str = "(format <= {format} AND deadline <= UTC_TIMESTAMP(6) AND (completed = 0 \
     OR deadline <= UTC_TIMESTAMP(6) - INTERVAL {trace} MICROSECOND))";

/// The record is live, or traced: completed, and expired no longer ago than
/// the trace.
const KEPT: &str = "(deadline > UTC_TIMESTAMP(6) OR (completed = 1 \
     AND deadline > UTC_TIMESTAMP(6) - INTERVAL {trace} MICROSECOND))";

/// The statements, rendered once for the configured database and table.
#[derive(Debug)]
pub struct Statements {
    /// The calls every prepared dialect makes alike.
    pub(crate) calls: PreparedCalls,
    /// The database, if not the pool's.
    pub(crate) database: Option<String>,
    /// The table's name, and the table as the statements name it.
    pub(crate) table: String,
    pub(crate) quoted: String,
    pub(crate) claim: Arc<str>,
    pub(crate) claimed: Arc<str>,
    pub(crate) migration: String,
}

impl Statements {
    /// The statements on `database`.`table`, with traces kept `trace_us`.
    pub(crate) fn new(database: Option<&str>, table: &str, trace_us: u64) -> Self {
        let t = match database {
            Some(database) => format!("`{database}`.`{table}`"),
            None => format!("`{table}`"),
        };
        let trace = trace_us.to_string();
        let dead = CLAIMABLE
            .replace("{trace}", &trace)
            .replace("{format}", &FORMAT.to_string());
        let kept = KEPT.replace("{trace}", &trace);
        Self {
            database: database.map(str::to_owned),
            table: table.to_owned(),
            quoted: t.clone(),
            calls: PreparedCalls {
            // in flight, holder's token | complete -> Completed (one row);
            // anything else changes nothing (see `completed_by`). Inside the
            // caller's transaction the row stays locked until it commits, so
            // a claim that would take it over waits for the commit.
            complete: format!(
                "UPDATE {t} SET completed = 1, \
                   deadline = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, outcome = ? \
                 WHERE id = ? AND token = ? AND completed = 0 AND deadline > UTC_TIMESTAMP(6)"
            )
            .into(),
            // Only when `complete` changed nothing: was it completed by this
            // very token already? completed by the holder's token | complete
            // -> Completed (first outcome kept); if not, anything else |
            // complete -> LeaseLost.
            completed_by: format!(
                "SELECT COUNT(*) FROM {t} \
                 WHERE id = ? AND token = ? AND completed = 1 AND deadline > UTC_TIMESTAMP(6)"
            )
            .into(),
            // in flight, holder's token | release -> Released (one row);
            // anything else | release -> LeaseLost.
            release: format!(
                "UPDATE {t} SET deadline = UTC_TIMESTAMP(6) \
                 WHERE id = ? AND token = ? AND completed = 0 AND deadline > UTC_TIMESTAMP(6)"
            )
            .into(),
            // in flight, holder's token | renew -> Renewed (one row);
            // anything else | renew -> LeaseLost.
            renew: format!(
                "UPDATE {t} SET deadline = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND \
                 WHERE id = ? AND token = ? AND completed = 0 AND deadline > UTC_TIMESTAMP(6)"
            )
            .into(),
            inspect: format!(
                "SELECT fingerprint, token, completed, outcome, format, \
                   GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), deadline), 0) AS left_us \
                 FROM {t} WHERE id = ? AND (deadline > UTC_TIMESTAMP(6) OR format > {FORMAT})"
            )
            .into(),
            // Ended rather than deleted, as a release: the token stays, so
            // the next claim's is greater. completed, traced, or in flight
            // with force | remove -> Removed (one row); if none, `live`
            // tells in flight, no force | remove -> RemoveRefused from none
            // | remove -> Absent.
            remove: format!(
                "UPDATE {t} SET completed = 0, outcome = NULL, deadline = UTC_TIMESTAMP(6) \
                 WHERE id = ? AND {kept} AND (completed = 1 OR ?) AND format <= {FORMAT}"
            )
            .into(),
            live: format!(
                "SELECT COUNT(*), COALESCE(MAX(format), {FORMAT}) FROM {t} \
                 WHERE id = ? AND ({kept} OR format > {FORMAT})"
            )
            .into(),
            // A record is dropped only once it is neither live nor traced
            // and the clock has passed its token, so later tokens drawn
            // from the clock stay greater. Oldest first, by the deadline's
            // index, a bounded batch: every row whose deadline is older than
            // the trace (so that no traced row is ever scanned past; a
            // claim released or abandoned stays that much longer, unread).
            purge: format!(
                "DELETE FROM {t} \
                 WHERE deadline < UTC_TIMESTAMP(6) - INTERVAL {trace} MICROSECOND \
                   AND token < {NOW_US} \
                 ORDER BY deadline LIMIT ?"
            )
            .into(),
            },
            // The claim, one prepared statement: an upsert that claims a
            // new or no-longer-live record in one atomic step, and reports
            // through the OK packet's insert id (`LAST_INSERT_ID(expr)`)
            // the fencing token it granted, or 0 if it granted none. See
            // `calls::begin`.
            // - none | begin -> Acquired: inserted, token = now;
            // - not live | begin -> Acquired: taken over, token =
            //   max(previous + 1, now);
            // - live or traced | begin -> InFlight, Replay, Expired or
            //   Mismatch: nothing changes (every column gets its own
            //   value), insert id 0, and `claimed` reads the record to
            //   tell which.
            // MySQL assigns the update's columns left to right, each seeing
            // the ones before it: `deadline`, which the test reads, is last
            // (`completed`, which it reads too, becomes 0 only when the
            // record is claimed, which leaves the test true).
            claim: format!(
                "INSERT INTO {t} (id, fingerprint, token, completed, deadline, outcome) \
                 VALUES (?, ?, LAST_INSERT_ID({NOW_US}), 0, \
                         UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, NULL) \
                 ON DUPLICATE KEY UPDATE \
                   token = IF(LAST_INSERT_ID(IF({dead}, GREATEST(token + 1, {NOW_US}), 0)) = 0, \
                              token, LAST_INSERT_ID()), \
                   fingerprint = IF({dead}, ?, fingerprint), \
                   completed = IF({dead}, 0, completed), \
                   outcome = IF({dead}, NULL, outcome), \
                   deadline = IF({dead}, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, deadline)"
            )
            .into(),
            claimed: format!(
                "SELECT completed, format, fingerprint = ? AS same, deadline > UTC_TIMESTAMP(6) AS live, \
                   IF(completed = 1 AND fingerprint = ? AND deadline > UTC_TIMESTAMP(6), \
                      outcome, NULL) AS outcome, \
                   GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), deadline), 0) AS left_us \
                 FROM {t} WHERE id = ? AND ({kept} OR format > {FORMAT})"
            )
            .into(),
            migration: format!(
                "CREATE TABLE IF NOT EXISTS {t} ( \
                   id BINARY(32) NOT NULL, \
                   fingerprint BINARY(32) NOT NULL, \
                   token BIGINT NOT NULL, \
                   completed BOOLEAN NOT NULL, \
                   deadline DATETIME(6) NOT NULL, \
                   outcome LONGBLOB NULL, \
                   format SMALLINT NOT NULL DEFAULT {FORMAT}, \
                   PRIMARY KEY (id), \
                   KEY `{table}_deadline` (deadline) \
                 ) ENGINE = InnoDB"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_tests_the_deadline_before_it_moves_it() {
        let sql = Statements::new(Some("test"), "records", 1_000_000);
        assert!(sql.claim.starts_with("INSERT INTO `test`.`records`"));
        // `deadline` is assigned last, after every column that tests it.
        let update = sql
            .claim
            .split("ON DUPLICATE KEY UPDATE")
            .nth(1)
            .unwrap_or("");
        let assigned: Vec<&str> = update
            .split(", ")
            .filter_map(|a| a.trim_start().split_once(" = ").map(|(c, _)| c))
            .filter(|c| c.chars().all(|ch| ch.is_ascii_lowercase()))
            .collect();
        assert_eq!(
            assigned,
            ["token", "fingerprint", "completed", "outcome", "deadline"]
        );
    }
}
