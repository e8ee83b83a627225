//! PostgreSQL's statements, rendered once for a schema and table: the
//! server's clock (`clock_timestamp()`) is inside each of them.

use std::sync::Arc;

/// The channel a store's changes are notified on: `idem_<schema>_<table>`,
/// cut to PostgreSQL's 63 bytes (names are ASCII). A collision of two long
/// names only wakes waiters that then look again.
pub(crate) fn channel(schema: &str, table: &str) -> String {
    let mut name = format!("idem_{schema}_{table}");
    name.truncate(63);
    name
}

/// The record format this version writes and reads: the `format` column.
/// A row of a later format (a greater number) is refused as newer, never
/// misread nor taken over.
pub(crate) const FORMAT: i16 = 1;

/// The statements, rendered once for the configured schema and table.
#[derive(Debug)]
pub struct Statements {
    pub(crate) begin: Arc<str>,
    pub(crate) complete: Arc<str>,
    pub(crate) completed_by: Arc<str>,
    pub(crate) release: Arc<str>,
    pub(crate) watch: Arc<str>,
    pub(crate) renew: Arc<str>,
    pub(crate) purge: Arc<str>,
    pub(crate) inspect: Arc<str>,
    pub(crate) remove: Arc<str>,
    pub(crate) migration: Vec<String>,
    /// Reads no row, and fails unless the table has every column the
    /// statements name.
    pub(crate) shape: String,
    /// Where changes are notified.
    pub(crate) channel: String,
    /// Whether statements are prepared once per connection and kept
    /// (named), or parsed with each execution (unnamed, for a transaction
    /// pooler that hands a server connection to another client after each
    /// transaction).
    pub(crate) persistent: bool,
}

impl Statements {
    /// The statements on `schema`.`table`, with traces kept `trace_us`.
    pub(crate) fn new(schema: &str, table: &str, persistent: bool, trace_us: u64) -> Self {
        let t = format!("\"{schema}\".\"{table}\"");
        let channel = channel(schema, table);
        let now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
        // Traced: completed, and expired no longer ago than the trace.
        let trace = format!("interval '{trace_us} microseconds'");
        let kept = format!(
            "(r.deadline > clock_timestamp() OR (r.completed AND r.deadline > clock_timestamp() - {trace}))"
        );
        Self {
            // One statement: claim a new or no-longer-live record, or read the
            // live one. If a concurrent insert commits between this statement's
            // snapshot and its insert, neither part returns a row and the
            // statement is run again. Rows of idem_core::machine's table, by
            // `kind`:
            // - 'A': none | begin -> Acquired (insert, or take over a record
            //   that is neither live nor traced: token max(previous + 1, now));
            // - 'I': in flight, same fingerprint | begin -> InFlight;
            // - 'R': completed, same fingerprint | begin -> Replay;
            // - 'E': expired, traced, same fingerprint | begin -> Expired;
            // - 'M': in flight, completed or traced, other fingerprint | begin -> Mismatch.
            begin: format!(
                "WITH clock AS (SELECT clock_timestamp() AS t), \
                 upsert AS ( \
                   INSERT INTO {t} AS r (id, fingerprint, token, completed, deadline, outcome, format) \
                   SELECT $1, $2, (extract(epoch FROM t) * 1000000)::bigint, false, \
                          t + $3::bigint * interval '1 microsecond', NULL, {FORMAT} FROM clock \
                   ON CONFLICT (id) DO UPDATE \
                     SET fingerprint = EXCLUDED.fingerprint, \
                         token = GREATEST(r.token + 1, EXCLUDED.token), \
                         completed = false, deadline = EXCLUDED.deadline, outcome = NULL, \
                         waiting = false \
                     WHERE r.format <= {FORMAT} AND NOT {kept} \
                   RETURNING r.token) \
                 SELECT 'A'::text AS kind, token, false AS completed, NULL::bytea AS outcome, \
                        0::bigint AS left_us, {FORMAT}::smallint AS format FROM upsert \
                 UNION ALL \
                 SELECT CASE WHEN r.fingerprint <> $2 THEN 'M' \
                             WHEN r.completed AND r.deadline <= clock.t THEN 'E' \
                             WHEN r.completed THEN 'R' ELSE 'I' END, \
                        r.token, r.completed, \
                        CASE WHEN r.completed AND r.fingerprint = $2 AND r.deadline > clock.t \
                             THEN r.outcome END, \
                        GREATEST((extract(epoch FROM (r.deadline - clock.t)) * 1000000)::bigint, 0), \
                        r.format \
                 FROM {t} r, clock WHERE r.id = $1 AND NOT EXISTS (SELECT 1 FROM upsert)"
            )
            .into(),
            // in flight, holder's token | complete -> Completed (changed = 1);
            // anything else changes nothing (see `completed_by`).
            // Each change a waiting duplicate cares about also notifies
            // `channel` (delivered at commit, so a completion inside the
            // caller's transaction wakes waiters once it is visible), but
            // only when a waiter marked the record: a NOTIFY serializes
            // commits, which every request would otherwise pay.
            complete: format!(
                "WITH done AS ( \
                   UPDATE {t} SET completed = true, \
                     deadline = clock_timestamp() + $3::bigint * interval '1 microsecond', outcome = $4 \
                   WHERE id = $1 AND token = $2 AND NOT completed AND deadline > clock_timestamp() \
                   RETURNING id, waiting), \
                 woken AS (SELECT pg_notify('{channel}', encode(id, 'hex')) FROM done WHERE waiting) \
                 SELECT (SELECT count(*) FROM done) AS changed, (SELECT count(*) FROM woken) AS woken"
            )
            .into(),
            // Only when `complete` changed nothing: was it completed by this
            // very token already (a transactional completion)? completed by
            // the holder's token | complete -> Completed (first outcome kept);
            // if not, anything else | complete -> LeaseLost.
            completed_by: format!(
                "SELECT EXISTS (SELECT 1 FROM {t} \
                   WHERE id = $1 AND token = $2 AND completed AND deadline > clock_timestamp())"
            )
            .into(),
            // in flight, holder's token | release -> Released (changed = 1);
            // anything else | release -> LeaseLost.
            release: format!(
                "WITH done AS ( \
                   UPDATE {t} SET deadline = clock_timestamp() \
                   WHERE id = $1 AND token = $2 AND NOT completed AND deadline > clock_timestamp() \
                   RETURNING id, waiting), \
                 woken AS (SELECT pg_notify('{channel}', encode(id, 'hex')) FROM done WHERE waiting) \
                 SELECT (SELECT count(*) FROM done) AS changed, (SELECT count(*) FROM woken) AS woken"
            )
            .into(),
            // A waiter marks the record it waits on, if it is still in
            // flight; if not, it has changed already.
            watch: format!(
                "UPDATE {t} SET waiting = true \
                 WHERE id = $1 AND NOT completed AND deadline > clock_timestamp()"
            )
            .into(),
            // in flight, holder's token | renew -> Renewed (one row);
            // anything else | renew -> LeaseLost.
            renew: format!(
                "UPDATE {t} SET deadline = clock_timestamp() + $3::bigint * interval '1 microsecond' \
                 WHERE id = $1 AND token = $2 AND NOT completed AND deadline > clock_timestamp()"
            )
            .into(),
            inspect: format!(
                "SELECT fingerprint, token, completed, outcome, format, \
                   GREATEST((extract(epoch FROM (deadline - clock_timestamp())) * 1000000)::bigint, 0) AS left_us \
                 FROM {t} WHERE id = $1 AND (deadline > clock_timestamp() OR format > {FORMAT})"
            )
            .into(),
            // Ended rather than deleted, as a release: the token stays, so
            // the next claim's is greater. By (ended, live): (1, 1)
            // completed, traced, or in flight with force | remove -> Removed;
            // (0, 1) in flight, no force | remove -> RemoveRefused; (0, 0)
            // none | remove -> Absent.
            remove: format!(
                "WITH live AS (SELECT completed, format FROM {t} r \
                   WHERE id = $1 AND ({kept} OR format > {FORMAT})), \
                 ended AS ( \
                   UPDATE {t} r SET completed = false, outcome = NULL, deadline = clock_timestamp() \
                   WHERE id = $1 AND {kept} AND (completed OR $2) AND format <= {FORMAT} \
                   RETURNING id, waiting), \
                 woken AS (SELECT pg_notify('{channel}', encode(id, 'hex')) FROM ended WHERE waiting) \
                 SELECT (SELECT count(*) FROM ended) AS ended, (SELECT count(*) FROM live) AS live, \
                   (SELECT COALESCE(max(format), {FORMAT})::smallint FROM live) AS format, \
                   (SELECT count(*) FROM woken) AS woken"
            )
            .into(),
            purge: purge(&t, &trace, now_us).into(),
            channel: channel.clone(),
            migration: migration(schema, table, &t),
            shape: format!(
                "SELECT id, fingerprint, token, completed, deadline, outcome, format, waiting \
                 FROM {t} LIMIT 0"
            ),
            persistent,
        }
    }
}

/// The purge. A record is dropped only once it is neither live nor traced
/// and the clock has passed its token, so later tokens drawn from
/// the clock stay greater: every row whose deadline is older than
/// the trace, oldest first by the deadline's index (no traced row
/// is ever scanned past; a claim released or abandoned stays that
/// much longer, unread), from `$2` (µs since the epoch): where
/// the last purge stopped, so that the scan does not walk again
/// the index entries of rows it deleted, which stay until a
/// vacuum (see `purge_cursor.rs`). The bound is the statement's
/// start (`statement_timestamp()`, stable), not `clock_timestamp()`,
/// which is volatile and so no bound of an index scan: with it the
/// scan read every entry past the cursor, live records included,
/// on each call. Answers how many, and the last deadline deleted.
fn purge(t: &str, trace: &str, now_us: &str) -> String {
    format!(
        "WITH gone AS ( \
           DELETE FROM {t} WHERE id IN ( \
             SELECT id FROM {t} \
             WHERE deadline >= timestamptz 'epoch' + $2 * interval '1 microsecond' \
               AND deadline < statement_timestamp() - {trace} AND token < {now_us} \
             ORDER BY deadline LIMIT $1 FOR UPDATE SKIP LOCKED) \
           RETURNING deadline) \
         SELECT count(*) AS purged, \
           COALESCE((extract(epoch FROM max(deadline)) * 1000000)::bigint, 0) AS last_us \
         FROM gone"
    )
}

/// The migration's statements for `schema`.`table` (`t`, quoted).
fn migration(schema: &str, table: &str, t: &str) -> Vec<String> {
    vec![
        format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""),
        format!(
            // Fixed widths first, widest first, then the byte strings:
            // no padding between columns (8 bytes a row less than the
            // order of tables made before; statements name columns).
            "CREATE TABLE IF NOT EXISTS {t} ( \
               token bigint NOT NULL, \
               deadline timestamptz NOT NULL, \
               format smallint NOT NULL DEFAULT {FORMAT}, \
               completed boolean NOT NULL, \
               waiting boolean NOT NULL DEFAULT false, \
               id bytea PRIMARY KEY, \
               fingerprint bytea NOT NULL, \
               outcome bytea)"
        ),
        // Tables made before waiters were woken.
        format!("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS waiting boolean NOT NULL DEFAULT false"),
        // Tables made before records named their format: every row in them
        // is of format 1.
        format!("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS format smallint NOT NULL DEFAULT 1"),
        format!("CREATE INDEX IF NOT EXISTS \"{table}_deadline_idx\" ON {t} (deadline)"),
    ]
}
