//! SQLite's statements, rendered once for a table and a trace.
//!
//! The clock is the host's, read by SQLite itself
//! (`unixepoch('now', 'subsec')`, in milliseconds): the same for every
//! process on the machine that opens the file, and, within one statement,
//! the same wherever the statement names it. Deadlines and tokens are
//! microseconds since the Unix epoch, in `INTEGER` columns.

use std::sync::Arc;

use crate::prepared_calls::PreparedCalls;

/// The clock, in microseconds since the Unix epoch.
const NOW: &str = "CAST(unixepoch('now', 'subsec') * 1000000 AS INTEGER)";

/// The record format this version writes and reads: the `format` column.
pub(crate) const FORMAT: i16 = 1;

/// The statements, rendered once for the configured table.
#[derive(Debug)]
pub struct Statements {
    /// The calls every prepared dialect makes alike.
    pub(crate) calls: PreparedCalls,
    pub(crate) claim: Arc<str>,
    pub(crate) claimed: Arc<str>,
    pub(crate) migration: Vec<String>,
    pub(crate) shape: Arc<str>,
}

impl Statements {
    /// The statements on `table`, with traces kept `trace_us`.
    pub(crate) fn new(table: &str, trace_us: u64) -> Self {
        let t = format!("\"{table}\"");
        // Live (its deadline ahead) or traced (completed, and expired no
        // longer ago than the trace).
        let kept =
            format!("(deadline > {NOW} OR (completed = 1 AND deadline > {NOW} - {trace_us}))");
        Self {
            // One atomic statement (SQLite runs one writer at a time): an
            // upsert that claims a new record, or takes over one that is of
            // this version's format and neither live nor traced (token
            // max(previous + 1, now)), and returns the token it granted.
            // It returns no row when the record is live or traced, and
            // changes nothing: `claimed` then reads it.
            claim: format!(
                "INSERT INTO {t} (id, fingerprint, token, completed, deadline, outcome, format) \
                 VALUES (?1, ?2, {NOW}, 0, {NOW} + ?3, NULL, {FORMAT}) \
                 ON CONFLICT (id) DO UPDATE SET \
                   fingerprint = excluded.fingerprint, \
                   token = MAX(token + 1, excluded.token), \
                   completed = 0, deadline = excluded.deadline, outcome = NULL \
                 WHERE format <= {FORMAT} AND NOT {kept} \
                 RETURNING token"
            )
            .into(),
            // What refused the claim; no row if it ended since (claim again).
            claimed: format!(
                "SELECT completed, format, fingerprint = ?2 AS same, deadline > {NOW} AS live, \
                   CASE WHEN completed = 1 AND fingerprint = ?2 AND deadline > {NOW} \
                        THEN outcome END AS outcome, \
                   MAX(deadline - {NOW}, 0) AS left_us \
                 FROM {t} WHERE id = ?1 AND ({kept} OR format > {FORMAT})"
            )
            .into(),
            calls: PreparedCalls {
                // in flight, holder's token | complete -> Completed (one row).
                // Inside the operation's transaction, SQLite's write lock is
                // held from here to the commit, so a claim that would take the
                // record over waits for it.
                complete: format!(
                    "UPDATE {t} SET completed = 1, deadline = {NOW} + ?1, outcome = ?2 \
                 WHERE id = ?3 AND token = ?4 AND completed = 0 AND deadline > {NOW}"
                )
                .into(),
                completed_by: format!(
                    "SELECT COUNT(*) FROM {t} \
                 WHERE id = ?1 AND token = ?2 AND completed = 1 AND deadline > {NOW}"
                )
                .into(),
                // in flight, holder's token | release -> Released (one row).
                release: format!(
                    "UPDATE {t} SET deadline = {NOW} \
                 WHERE id = ?1 AND token = ?2 AND completed = 0 AND deadline > {NOW}"
                )
                .into(),
                // in flight, holder's token | renew -> Renewed (one row).
                renew: format!(
                    "UPDATE {t} SET deadline = {NOW} + ?1 \
                 WHERE id = ?2 AND token = ?3 AND completed = 0 AND deadline > {NOW}"
                )
                .into(),
                inspect: format!(
                    "SELECT fingerprint, token, completed, outcome, format, \
                   MAX(deadline - {NOW}, 0) AS left_us \
                 FROM {t} WHERE id = ?1 AND (deadline > {NOW} OR format > {FORMAT})"
                )
                .into(),
                // Ended rather than deleted, as a release: the token stays, so
                // the next claim's is greater. completed, traced, or in flight
                // with force | remove -> Removed (one row); if none, `live`
                // tells in flight (refused) from none (absent).
                remove: format!(
                    "UPDATE {t} SET completed = 0, outcome = NULL, deadline = {NOW} \
                 WHERE id = ?1 AND {kept} AND (completed = 1 OR ?2) AND format <= {FORMAT}"
                )
                .into(),
                live: format!(
                    "SELECT COUNT(*), COALESCE(MAX(format), {FORMAT}) FROM {t} \
                 WHERE id = ?1 AND ({kept} OR format > {FORMAT})"
                )
                .into(),
                // A record is dropped only once it is neither live nor traced
                // and the clock has passed its token, so later tokens drawn
                // from the clock stay greater. Oldest first, by the deadline's
                // index, a bounded batch.
                purge: format!(
                    "DELETE FROM {t} WHERE rowid IN ( \
                   SELECT rowid FROM {t} \
                   WHERE deadline < {NOW} - {trace_us} AND token < {NOW} \
                   ORDER BY deadline LIMIT ?1)"
                )
                .into(),
            },
            migration: vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} ( \
                       id BLOB NOT NULL PRIMARY KEY, \
                       fingerprint BLOB NOT NULL, \
                       token INTEGER NOT NULL, \
                       completed INTEGER NOT NULL, \
                       deadline INTEGER NOT NULL, \
                       outcome BLOB, \
                       format INTEGER NOT NULL DEFAULT {FORMAT})"
                ),
                format!("CREATE INDEX IF NOT EXISTS \"{table}_deadline\" ON {t} (deadline)"),
            ],
            // Every column the store reads, written (to no row): a table of
            // the same name made by something else fails here, and so does
            // a database that cannot be written, even when nothing needs
            // to be created.
            shape: format!(
                "UPDATE {t} SET id = id, fingerprint = fingerprint, token = token, \
                   completed = completed, deadline = deadline, outcome = outcome, format = format \
                 WHERE 0"
            )
            .into(),
        }
    }
}
