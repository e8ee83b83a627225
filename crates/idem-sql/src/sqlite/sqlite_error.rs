//! What a SQLite error means to idem: transient (`Unavailable`: a retry may
//! succeed once the lock is free or the file writable), `Full` (the disk or
//! SQLite's size limit), or `Corrupt` (the table is missing or of another
//! shape, or the file is not a database), each saying what to do.

use idem_core::StoreError;

/// SQLite's primary result codes idem tells apart (an extended code's low
/// byte).
pub(crate) mod code {
    /// `SQLITE_ERROR`: among others, a missing table or column.
    pub(crate) const ERROR: i64 = 1;
    /// `SQLITE_BUSY`: locked by another connection past the busy timeout.
    pub(crate) const BUSY: i64 = 5;
    /// `SQLITE_LOCKED`: locked within this connection's shared cache.
    pub(crate) const LOCKED: i64 = 6;
    /// `SQLITE_READONLY`.
    pub(crate) const READONLY: i64 = 8;
    /// `SQLITE_IOERR`.
    pub(crate) const IOERR: i64 = 10;
    /// `SQLITE_CORRUPT`.
    pub(crate) const CORRUPT: i64 = 11;
    /// `SQLITE_FULL`: the disk, or `max_page_count`.
    pub(crate) const FULL: i64 = 13;
    /// `SQLITE_CANTOPEN`.
    pub(crate) const CANTOPEN: i64 = 14;
    /// `SQLITE_TOOBIG`: a value beyond `SQLITE_MAX_LENGTH`.
    pub(crate) const TOOBIG: i64 = 18;
    /// `SQLITE_NOTADB`.
    pub(crate) const NOTADB: i64 = 26;
}

/// SQLite's primary result code, if the error is SQLite's.
pub(crate) fn primary_code(e: &sqlx::Error) -> Option<i64> {
    match e {
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|c| c.parse::<i64>().ok())
            .map(|c| c & 0xff),
        _ => None,
    }
}

/// `e`, met while doing `what`, as a [`StoreError`] of the right kind.
pub(crate) fn store_error(what: &str, e: sqlx::Error) -> StoreError {
    let message = match &e {
        sqlx::Error::Database(db) => db.message().to_owned(),
        sqlx::Error::ColumnNotFound(column) => {
            return StoreError::corrupt(format!(
                "sqlite {what}: the records table has no column `{column}`: it was not made by \
                 SqliteStore::migrate; migrate into a new table"
            ))
        }
        sqlx::Error::ColumnDecode { index, source } => {
            return StoreError::corrupt(format!(
                "sqlite {what}: column {index} of the records table is not of the type the \
                 migration makes ({source})"
            ))
        }
        _ => String::new(),
    };
    match primary_code(&e) {
        Some(code::BUSY | code::LOCKED) => StoreError::unavailable(
            format!(
                "sqlite {what}: the database stayed locked past the busy timeout (another \
                 connection or process is writing); nothing was changed"
            ),
            e,
        ),
        Some(code::FULL) => StoreError::full_because(format!(
            "sqlite {what}: the disk is full (or the database reached max_page_count); nothing \
             was changed ({message})"
        )),
        Some(code::TOOBIG) => StoreError::full_because(format!(
            "sqlite {what}: the record is larger than SQLite's length limit; answer with less \
             ({message})"
        )),
        Some(code::READONLY) => StoreError::unavailable(
            format!(
                "sqlite {what}: the database cannot be written (a read-only file, directory or \
                 connection); nothing was changed"
            ),
            e,
        ),
        Some(code::CORRUPT | code::NOTADB) => StoreError::corrupt(format!(
            "sqlite {what}: the file is not a SQLite database, or is damaged ({message})"
        )),
        Some(code::ERROR) if message.contains("no such table") => StoreError::corrupt(format!(
            "sqlite {what}: the records table does not exist; run SqliteStore::migrate first \
             ({message})"
        )),
        Some(code::ERROR) if message.contains("no such column") => StoreError::corrupt(format!(
            "sqlite {what}: the records table is not of the shape SqliteStore::migrate makes \
             ({message})"
        )),
        Some(code::CANTOPEN | code::IOERR) => StoreError::unavailable(
            format!("sqlite {what}: the database file cannot be opened or read ({message})"),
            e,
        ),
        _ => StoreError::unavailable(format!("sqlite {what} failed"), e),
    }
}
