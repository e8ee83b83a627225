//! What a server's error means to idem: transient (`Unavailable`: a retry
//! may succeed once the server is back, unlocked or writable) or not
//! (`Corrupt`: the table is missing or of another shape; `Full`: a record
//! larger than the server accepts), each saying what to do.

use idem_core::StoreError;
use sqlx::mysql::MySqlDatabaseError;

/// The server's error numbers idem tells apart.
pub(crate) mod number {
    /// `ER_DUP_FIELDNAME`: the column is there already.
    pub(crate) const DUPLICATE_COLUMN: u16 = 1060;
    /// `ER_NO_SUCH_TABLE`.
    pub(crate) const NO_SUCH_TABLE: u16 = 1146;
    /// `ER_BAD_FIELD_ERROR`: a column the statement names is missing.
    pub(crate) const BAD_FIELD: u16 = 1054;
    /// `ER_LOCK_WAIT_TIMEOUT`.
    pub(crate) const LOCK_WAIT_TIMEOUT: u16 = 1205;
    /// `ER_LOCK_DEADLOCK`: the statement was rolled back.
    pub(crate) const DEADLOCK: u16 = 1213;
    /// `ER_OPTION_PREVENTS_STATEMENT` (`--read-only`, among others).
    pub(crate) const OPTION_PREVENTS_STATEMENT: u16 = 1290;
    /// `ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION`.
    pub(crate) const READ_ONLY_TRANSACTION: u16 = 1792;
    /// `ER_READ_ONLY_MODE` (MariaDB's `read_only` for an InnoDB write).
    pub(crate) const READ_ONLY_MODE: u16 = 1836;
    /// `ER_NET_PACKET_TOO_LARGE`: beyond `max_allowed_packet`.
    pub(crate) const PACKET_TOO_LARGE: u16 = 1153;
    /// `ER_TRUNCATED_WRONG_VALUE_FOR_FIELD` and `ER_DATA_TOO_LONG`: a
    /// column of another type than the migration's.
    pub(crate) const WRONG_VALUE: [u16; 2] = [1366, 1406];
}

/// The server's error number, if the server answered with one.
pub(crate) fn error_number(e: &sqlx::Error) -> Option<u16> {
    match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(MySqlDatabaseError::number),
        _ => None,
    }
}

/// `e`, met while doing `what`, as a [`StoreError`] of the right kind.
pub(crate) fn store_error(what: &str, e: sqlx::Error) -> StoreError {
    let Some(n) = error_number(&e) else {
        return match e {
            sqlx::Error::ColumnNotFound(column) => StoreError::corrupt(format!(
                "mysql {what}: the records table has no column `{column}`: it was not made by \
                 MySqlStore::migrate (or by an older version); migrate into a new table"
            )),
            sqlx::Error::ColumnDecode { index, source } => StoreError::corrupt(format!(
                "mysql {what}: column {index} of the records table is not of the type the \
                 migration makes ({source})"
            )),
            e => StoreError::unavailable(format!("mysql {what} failed"), e),
        };
    };
    match n {
        number::NO_SUCH_TABLE => StoreError::corrupt(format!(
            "mysql {what}: the records table does not exist; run MySqlStore::migrate first ({e})"
        )),
        number::BAD_FIELD => StoreError::corrupt(format!(
            "mysql {what}: the records table is not of the shape MySqlStore::migrate makes ({e})"
        )),
        n if number::WRONG_VALUE.contains(&n) => StoreError::corrupt(format!(
            "mysql {what}: a column of the records table is not of the type MySqlStore::migrate \
             makes ({e})"
        )),
        number::PACKET_TOO_LARGE => StoreError::full_because(format!(
            "mysql {what}: the record is larger than the server's max_allowed_packet; raise it \
             or answer with less ({e})"
        )),
        number::LOCK_WAIT_TIMEOUT => StoreError::unavailable(
            format!(
                "mysql {what}: the record's row stayed locked past innodb_lock_wait_timeout \
                 (another transaction holds it); nothing was changed"
            ),
            e,
        ),
        number::DEADLOCK => StoreError::unavailable(
            format!("mysql {what}: rolled back by the server as a deadlock; nothing was changed"),
            e,
        ),
        number::OPTION_PREVENTS_STATEMENT
        | number::READ_ONLY_TRANSACTION
        | number::READ_ONLY_MODE => StoreError::unavailable(
            format!(
                "mysql {what}: the server is read-only (a replica, or a primary being \
                     switched over); nothing was changed"
            ),
            e,
        ),
        _ => StoreError::unavailable(format!("mysql {what} failed"), e),
    }
}
