//! Reading the replies of the operators' calls (`inspect`, `remove`) and the
//! record's fields.

use std::time::Duration;

use idem_core::{
    FencingToken, Fingerprint, Outcome, RecordInfo, RecordInfoState, Removal, StoreError,
};
use redis::Value;

use crate::value_layout::{
    COMPLETED, FINGERPRINT, IN_FLIGHT, OUTCOME, RELEASED, TOKEN, TRACED, TRACED_OUTCOME,
};

/// A token as the records spell it, read back.
pub(crate) fn parse_token(bytes: &[u8]) -> Result<FencingToken, StoreError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| t.parse().ok())
        .map(FencingToken)
        .ok_or_else(|| StoreError::corrupt("redis: a record's token is not a decimal number"))
}

/// A record whose first byte names a format newer than this version's.
pub(crate) fn newer_format(state: u8) -> StoreError {
    StoreError::newer_format(
        "the Redis record",
        char::from(state).escape_default(),
        crate::value_layout::FORMAT,
    )
}

/// The inspect script's reply: 0 for no live record, else the record's
/// value and the milliseconds left of its lease or its replay.
pub(crate) fn inspected(reply: &Value) -> Result<Option<RecordInfo>, StoreError> {
    let corrupt = || StoreError::corrupt(format!("redis inspect: unexpected reply {reply:?}"));
    let (value, ttl) = match reply {
        Value::Int(0) => return Ok(None),
        Value::Array(items) => match (items.first(), items.get(1)) {
            (Some(Value::BulkString(v)), Some(Value::Int(ttl))) => (v, *ttl),
            _ => return Err(corrupt()),
        },
        _ => return Err(corrupt()),
    };
    if let Some(&state) = value
        .first()
        .filter(|s| ![IN_FLIGHT, COMPLETED, RELEASED, TRACED].contains(s))
    {
        return Err(newer_format(state));
    }
    let least = if value.first() == Some(&TRACED) {
        TRACED_OUTCOME
    } else {
        OUTCOME
    };
    if value.len() < least {
        return Err(corrupt());
    }
    let fingerprint: [u8; 32] = value[FINGERPRINT].try_into().map_err(|_| corrupt())?;
    let token = parse_token(&value[TOKEN])?;
    let left = Duration::from_millis(u64::try_from(ttl).unwrap_or(0));
    let state = match value[0] {
        IN_FLIGHT => RecordInfoState::InFlight { lease_left: left },
        COMPLETED => RecordInfoState::Completed {
            expires_in: left,
            outcome: Outcome::new(value[OUTCOME..].to_vec()),
        },
        TRACED => RecordInfoState::Completed {
            expires_in: left,
            outcome: Outcome::new(value[TRACED_OUTCOME..].to_vec()),
        },
        // Not live (the script leaves these out; this keeps the rule here).
        RELEASED => return Ok(None),
        _ => return Err(corrupt()),
    };
    Ok(Some(RecordInfo {
        fingerprint: Fingerprint::from_bytes(fingerprint),
        token,
        state,
    }))
}

/// The remove script's reply.
pub(crate) fn removed(reply: &Value) -> Result<Removal, StoreError> {
    match reply {
        Value::Int(1) => Ok(Removal::Removed),
        Value::Int(2) => Ok(Removal::RefusedInFlight),
        Value::Int(0) => Ok(Removal::Absent),
        other => Err(StoreError::corrupt(format!(
            "redis remove: unexpected reply {other:?}"
        ))),
    }
}
