//! `RecordRow`: a row of the records table read into what the store
//! decides on, by the column names every dialect's statements give, once
//! for every database sqlx decodes the table's types for.

use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::dialect::{Columns, Ended, Found};

/// A row a dialect's statement answered with, read by column name.
pub trait RecordRow {
    /// A live record's columns: `fingerprint`, `token`, `completed`,
    /// `outcome`, `left_us`, `format`.
    fn record(&self) -> Result<Columns, sqlx::Error>;

    /// What refused a claim: `completed`, `outcome`, `left_us`, `format`,
    /// beside what the dialect read of `same` and `live`.
    fn found(&self, same: bool, live: bool) -> Result<Found, sqlx::Error>;

    /// A removal that ended nothing: whether a live record is there (the
    /// first column, a count) and its format (the second).
    fn not_ended(&self) -> Result<Ended, sqlx::Error>;

    /// The first column, a count of rows changed, is 1.
    fn one(&self) -> Result<bool, sqlx::Error>;
}

impl<R> RecordRow for R
where
    R: Row,
    usize: ColumnIndex<R>,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i16: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    fn record(&self) -> Result<Columns, sqlx::Error> {
        Ok(Columns {
            fingerprint: self.try_get("fingerprint")?,
            token: self.try_get("token")?,
            completed: self.try_get("completed")?,
            outcome: self.try_get("outcome")?,
            left_us: self.try_get("left_us")?,
            format: self.try_get("format")?,
        })
    }

    fn found(&self, same: bool, live: bool) -> Result<Found, sqlx::Error> {
        Ok(Found {
            same,
            live,
            completed: self.try_get("completed")?,
            outcome: self.try_get("outcome")?,
            left_us: self.try_get("left_us")?,
            format: self.try_get("format")?,
        })
    }

    fn not_ended(&self) -> Result<Ended, sqlx::Error> {
        Ok(Ended {
            ended: false,
            live: self.try_get::<i64, _>(0_usize)? > 0,
            format: self.try_get(1_usize)?,
        })
    }

    fn one(&self) -> Result<bool, sqlx::Error> {
        Ok(self.try_get::<i64, _>(0_usize)? == 1)
    }
}
