//! Reading Redis Streams replies: an entry's fields into the message the
//! pipeline reads, and `XREADGROUP`'s and `XCLAIM`'s lists of entries.
//!
//! Entries are read here rather than through redis-rs's typed replies
//! (`StreamReadReply`, `StreamClaimReply`), which hold an entry's fields in
//! a `HashMap<String, _>`: a message's headers would lose their order, a
//! field name that is not UTF-8 would fail the whole reply, and a repeated
//! name would keep one value. (`XPENDING`'s reply, ids and counts, is read
//! typed.)

use redis::Value;

use crate::message::Message;

/// What the pipeline reads of an entry's fields.
pub fn message_of(fields: &[(Vec<u8>, Vec<u8>)], deliveries: u32) -> Message {
    let mut message = Message::default().delivered(deliveries.max(1));
    for (name, value) in fields {
        match name.as_slice() {
            b"payload" => message.payload = value.clone().into(),
            b"id" => message.id = Some(String::from_utf8_lossy(value).into_owned()),
            _ => message.headers.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            )),
        }
    }
    message
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// An entry's fields, as names and values.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// `[[id, [field, value, ...]], ...]` as entries.
pub(crate) fn entries(list: &Value) -> Vec<(String, Fields)> {
    let Value::Array(items) = list else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|entry| {
            let Value::Array(parts) = entry else {
                return None;
            };
            let id = text(parts.first()?)?;
            // A deleted entry still pending reads as [id, nil].
            let fields = match parts.get(1) {
                Some(Value::Array(kv)) => kv
                    .chunks(2)
                    .filter_map(|p| match (p.first()?, p.get(1)?) {
                        (Value::BulkString(k), Value::BulkString(v)) => {
                            Some((k.clone(), v.clone()))
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            Some((id, fields))
        })
        .collect()
}
