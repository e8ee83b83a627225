//! A record as a DynamoDB item: its attributes, written from and read into
//! the transition table's [`Record`].

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use idem_core::machine::{Record, RecordState};
use idem_core::store::StoreError;
use idem_core::{FencingToken, Fingerprint, Outcome, RecordId};

/// An item's attributes, by name.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// The partition key: the record id's 32 bytes.
pub(crate) const PK: &str = "pk";
/// The request's fingerprint, 32 bytes.
pub(crate) const FP: &str = "fp";
/// The latest claim's fencing token.
pub(crate) const TOKEN: &str = "tok";
/// `F` in flight, `C` completed.
pub(crate) const STATE: &str = "st";
/// The lease's end (in flight) or the record's expiry (completed), in
/// microseconds.
pub(crate) const UNTIL: &str = "until";
/// Until when the record refuses a retry: its deadline, or a completed
/// record's trace's end, in microseconds. Never before `until`.
pub(crate) const TRACED: &str = "traced";
/// A completed record's outcome.
pub(crate) const OUTCOME: &str = "out";
/// The record format.
pub(crate) const FORMAT: &str = "fmt";
/// Seconds since the epoch after which DynamoDB's TTL may delete the item.
pub(crate) const EXPIRES: &str = "expires";

/// The largest outcome a record keeps: DynamoDB's item limit (400 KB)
/// less room for the record's other attributes.
pub const MAX_OUTCOME_BYTES: usize = 400 * 1024 - 1024;

/// The record format this version writes and reads.
pub(crate) const RECORD_FORMAT: i16 = 1;

/// In flight.
pub(crate) const IN_FLIGHT: &str = "F";
/// Completed.
pub(crate) const COMPLETED: &str = "C";

/// A number attribute.
pub(crate) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A binary attribute.
pub(crate) fn b(bytes: impl Into<Vec<u8>>) -> AttributeValue {
    AttributeValue::B(Blob::new(bytes))
}

/// The key of record `id`.
pub(crate) fn key(id: &RecordId) -> AttributeValue {
    b(id.as_bytes().to_vec())
}

/// The item that keeps `record` under `id`. Its TTL is past everything
/// that counts: the trace's end and the token's time, so that a token drawn
/// from the clock after DynamoDB deletes it is still greater.
pub(crate) fn item_of(id: &RecordId, record: &Record) -> Item {
    let (state, until, traced) = deadlines(record);
    let mut item = Item::from([
        (PK.to_owned(), key(id)),
        (FP.to_owned(), b(record.fingerprint.as_bytes().to_vec())),
        (TOKEN.to_owned(), n(record.token.0)),
        (STATE.to_owned(), AttributeValue::S(state.to_owned())),
        (UNTIL.to_owned(), n(until)),
        (TRACED.to_owned(), n(traced)),
        (
            FORMAT.to_owned(),
            AttributeValue::N(RECORD_FORMAT.to_string()),
        ),
        (EXPIRES.to_owned(), n(expires(record))),
    ]);
    if let RecordState::Completed { outcome, .. } = &record.state {
        item.insert(OUTCOME.to_owned(), b(outcome.as_bytes().to_vec()));
    }
    item
}

/// A record's state letter, deadline and trace's end.
pub(crate) fn deadlines(record: &Record) -> (&'static str, u64, u64) {
    match record.state {
        RecordState::InFlight { lease_until } => (IN_FLIGHT, lease_until, lease_until),
        RecordState::Completed {
            expires_at,
            traced_until,
            ..
        } => (COMPLETED, expires_at, traced_until.max(expires_at)),
    }
}

/// The TTL attribute's value for `record`: a second past the later of its
/// trace's end and its token.
pub(crate) fn expires(record: &Record) -> u64 {
    let (_, _, traced) = deadlines(record);
    traced.max(record.token.0) / 1_000_000 + 1
}

/// Reads an item back into a record.
///
/// # Errors
///
/// An item this version cannot read: a newer format (refused, not
/// misread), or a missing or malformed attribute (corrupt).
pub(crate) fn record_of(item: &Item) -> Result<Record, StoreError> {
    let format = number(item, FORMAT)?;
    StoreError::refuse_newer_format(
        "a DynamoDB record",
        i16::try_from(format).unwrap_or(i16::MAX),
        RECORD_FORMAT,
    )?;
    let fingerprint = match item.get(FP) {
        Some(AttributeValue::B(blob)) => <[u8; 32]>::try_from(blob.as_ref())
            .map(Fingerprint::from_bytes)
            .map_err(|_| corrupt(FP))?,
        _ => return Err(corrupt(FP)),
    };
    let token = FencingToken(number(item, TOKEN)?);
    let until = number(item, UNTIL)?;
    let state = match item.get(STATE) {
        Some(AttributeValue::S(s)) if s == IN_FLIGHT => {
            RecordState::InFlight { lease_until: until }
        }
        Some(AttributeValue::S(s)) if s == COMPLETED => RecordState::Completed {
            outcome: match item.get(OUTCOME) {
                Some(AttributeValue::B(blob)) => Outcome::new(blob.as_ref().to_vec()),
                _ => return Err(corrupt(OUTCOME)),
            },
            expires_at: until,
            traced_until: number(item, TRACED)?,
        },
        _ => return Err(corrupt(STATE)),
    };
    Ok(Record {
        fingerprint,
        token,
        state,
    })
}

/// A number attribute's value.
fn number(item: &Item, name: &str) -> Result<u64, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| corrupt(name)),
        _ => Err(corrupt(name)),
    }
}

fn corrupt(name: &str) -> StoreError {
    StoreError::corrupt(format!(
        "a DynamoDB record whose attribute `{name}` is missing or malformed"
    ))
}

/// Refuses an outcome over `max` bytes, which a DynamoDB item would not
/// keep.
pub(crate) fn refuse_oversized(outcome: &Outcome, max: usize) -> Result<(), StoreError> {
    if outcome.len() > max {
        return Err(StoreError::full_because(format!(
            "an outcome of {} bytes does not fit a DynamoDB item (at most {max} bytes of \
             outcome): it is not recorded",
            outcome.len()
        )));
    }
    Ok(())
}
