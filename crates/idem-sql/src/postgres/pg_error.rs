//! What PostgreSQL's errors mean to idem: transient (`Unavailable`: a retry
//! may succeed once the server is back, unlocked or writable) or not
//! (`Corrupt`: the table is missing or of another shape; `Full`: the disk
//! is), each saying what to do.

use idem_core::StoreError;

/// The SQLSTATE codes idem tells apart.
mod code {
    /// `undefined_table`.
    pub(super) const UNDEFINED_TABLE: &str = "42P01";
    /// `invalid_schema_name`: the schema is missing.
    pub(super) const INVALID_SCHEMA: &str = "3F000";
    /// `undefined_column`: a column the statement names is missing.
    pub(super) const UNDEFINED_COLUMN: &str = "42703";
    /// `datatype_mismatch` and `undefined_function`: a column of another
    /// type than the migration's.
    pub(super) const WRONG_TYPE: [&str; 2] = ["42804", "42883"];
    /// `disk_full`.
    pub(super) const DISK_FULL: &str = "53100";
    /// `serialization_failure` and `deadlock_detected`: rolled back.
    pub(super) const ROLLED_BACK: [&str; 2] = ["40001", "40P01"];
    /// `lock_not_available` (`lock_timeout`) and `query_canceled`
    /// (`statement_timeout`).
    pub(super) const TIMED_OUT: [&str; 2] = ["55P03", "57014"];
    /// `read_only_sql_transaction`: a standby, or a primary being switched
    /// over.
    pub(super) const READ_ONLY: &str = "25006";
}

/// `e`, met while doing `what`, as a [`StoreError`] of the right kind.
pub(crate) fn store_error(what: &str, e: sqlx::Error) -> StoreError {
    let code = match &e {
        sqlx::Error::Database(db) => db.code().map(std::borrow::Cow::into_owned),
        sqlx::Error::ColumnNotFound(column) => {
            return StoreError::corrupt(format!(
                "postgres {what}: the records table has no column `{column}`: it was not made \
                 by PgStore::migrate; migrate into a new table"
            ))
        }
        sqlx::Error::ColumnDecode { index, source } => {
            return StoreError::corrupt(format!(
                "postgres {what}: column {index} of the records table is not of the type the \
                 migration makes ({source})"
            ))
        }
        _ => None,
    };
    match code.as_deref() {
        Some(code::UNDEFINED_TABLE | code::INVALID_SCHEMA) => StoreError::corrupt(format!(
            "postgres {what}: the records table does not exist; run PgStore::migrate first ({e})"
        )),
        Some(code::UNDEFINED_COLUMN) => StoreError::corrupt(format!(
            "postgres {what}: the records table is not of the shape PgStore::migrate makes ({e})"
        )),
        Some(c) if code::WRONG_TYPE.contains(&c) => StoreError::corrupt(format!(
            "postgres {what}: a column of the records table is not of the type PgStore::migrate \
             makes ({e})"
        )),
        Some(code::DISK_FULL) => StoreError::full_because(format!(
            "postgres {what}: the server's disk is full; nothing was changed ({e})"
        )),
        Some(c) if code::ROLLED_BACK.contains(&c) => StoreError::unavailable(
            format!("postgres {what}: rolled back by the server; nothing was changed"),
            e,
        ),
        Some(c) if code::TIMED_OUT.contains(&c) => StoreError::unavailable(
            format!(
                "postgres {what}: cancelled by the server's lock_timeout or statement_timeout; \
                 nothing was changed"
            ),
            e,
        ),
        Some(code::READ_ONLY) => StoreError::unavailable(
            format!(
                "postgres {what}: the server is read-only (a standby, or a primary being \
                 switched over); nothing was changed"
            ),
            e,
        ),
        _ => StoreError::unavailable(format!("postgres {what} failed"), e),
    }
}
