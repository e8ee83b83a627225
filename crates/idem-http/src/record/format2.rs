//! Record format 2 (`IDR2`), the one this version writes: format 1's
//! contents in fewer bytes, since a record is kept for every request for a
//! day (the payments debit's record is 107 bytes, against 151 in format 1).
//!
//! | what | how |
//! | --- | --- |
//! | magic | `IDR2` |
//! | status | a varint of the status minus 100 (one byte for 100 to 227) |
//! | headers | a varint count, then each header as a field |
//! | body | a varint length, then the body |
//! | trailers, if any | a varint count, then each trailer as a field |
//!
//! A field is one of:
//!
//! - `0x80 + i`: the `i`-th of [`PAIRS`], a name with its value;
//! - `0x40 + i`, a varint length, the value: the `i`-th of [`NAMES`] with
//!   that value;
//! - `0x00`, a varint length, the name, a varint length, the value.
//!
//! Varints are unsigned LEB128. Both tables only ever grow at their end: a
//! record names its fields by their place in them.

use bytes::Bytes;

use super::{Reader, RecordedResponse, Unreadable};

/// The first four bytes of a format 2 record.
pub(super) const MAGIC: &[u8; 4] = b"IDR2";

/// Fields written as one byte, `0x80` plus their place here (at most 64).
const PAIRS: [(&str, &[u8]); 12] = [
    ("content-type", b"application/json"),
    ("content-type", b"application/grpc"),
    ("content-type", b"application/problem+json"),
    ("content-type", b"text/plain; charset=utf-8"),
    ("content-type", b"application/json; charset=utf-8"),
    ("content-type", b"text/html; charset=utf-8"),
    ("content-type", b"application/octet-stream"),
    ("grpc-status", b"0"),
    ("cache-control", b"no-store"),
    ("cache-control", b"no-cache"),
    ("content-encoding", b"gzip"),
    ("vary", b"accept-encoding"),
];

/// Names written as one byte, `0x40` plus their place here (at most 64),
/// before their value.
const NAMES: [&str; 18] = [
    "content-type",
    "location",
    "cache-control",
    "etag",
    "last-modified",
    "vary",
    "set-cookie",
    "content-encoding",
    "content-language",
    "content-disposition",
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
    "retry-after",
    "link",
    "expires",
    "date",
    "x-request-id",
];

const LITERAL: u8 = 0x00;
const NAMED: u8 = 0x40;
const PAIR: u8 = 0x80;

/// The record of a response whose hop-by-hop headers are already left out.
pub(super) fn write(
    status: u16,
    headers: &[(&str, &[u8])],
    body: &[u8],
    trailers: &[(&str, &[u8])],
) -> Vec<u8> {
    let fields = |f: &[(&str, &[u8])]| f.iter().map(|(n, v)| 11 + n.len() + v.len()).sum::<usize>();
    let mut out = Vec::with_capacity(4 + 3 + 20 + fields(headers) + body.len() + fields(trailers));
    out.extend_from_slice(MAGIC);
    // Statuses are 100 to 999; any other u16 still round-trips (and is
    // refused when read, as in format 1).
    put_varint(&mut out, u64::from(status.wrapping_sub(100)));
    put_fields(&mut out, headers);
    put_varint(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    if !trailers.is_empty() {
        put_fields(&mut out, trailers);
    }
    out
}

/// Reads what follows the magic.
pub(super) fn read(r: &mut Reader<'_>, whole: &Bytes) -> Result<RecordedResponse, Unreadable> {
    let status = u16::try_from(r.varint("status")?)
        .map_err(|_| Unreadable("status"))?
        .wrapping_add(100);
    let headers = fields(r, whole)?;
    let body = whole.slice_ref(r.counted("body")?);
    let trailers = if r.is_empty() {
        Vec::new()
    } else {
        fields(r, whole)?
    };
    Ok(RecordedResponse {
        status,
        headers,
        body,
        trailers,
    })
}

fn put_fields(out: &mut Vec<u8>, fields: &[(&str, &[u8])]) {
    put_varint(out, fields.len() as u64);
    for &(name, value) in fields {
        if let Some(i) = PAIRS.iter().position(|&(n, v)| n == name && v == value) {
            out.push(PAIR + index(i));
        } else if let Some(i) = NAMES.iter().position(|&n| n == name) {
            out.push(NAMED + index(i));
            put_counted(out, value);
        } else {
            out.push(LITERAL);
            put_counted(out, name.as_bytes());
            put_counted(out, value);
        }
    }
}

/// A place in one of the tables, which hold at most 64 entries.
fn index(i: usize) -> u8 {
    u8::try_from(i).unwrap_or(u8::MAX) & 0x3f
}

fn fields(r: &mut Reader<'_>, whole: &Bytes) -> Result<Vec<(String, Bytes)>, Unreadable> {
    let count = r.varint("field count")?;
    let mut fields = Vec::new();
    for _ in 0..count {
        let [tag] = r.array::<1>("field")?;
        let i = usize::from(tag & 0x3f);
        match tag & 0xc0 {
            PAIR => {
                let &(name, value) = PAIRS.get(i).ok_or(Unreadable("field"))?;
                fields.push((name.to_owned(), Bytes::from_static(value)));
            }
            NAMED => {
                let name = NAMES.get(i).ok_or(Unreadable("field name"))?;
                fields.push((
                    (*name).to_owned(),
                    whole.slice_ref(r.counted("field value")?),
                ));
            }
            LITERAL if tag == LITERAL => {
                let name = std::str::from_utf8(r.counted("field name")?)
                    .map_err(|_| Unreadable("field name"))?
                    .to_owned();
                fields.push((name, whole.slice_ref(r.counted("field value")?)));
            }
            _ => return Err(Unreadable("field")),
        }
    }
    Ok(fields)
}

fn put_counted(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    // The low seven bits each time: `n & 0x7f` always fits a byte.
    let low = |n: u64| u8::try_from(n & 0x7f).unwrap_or(0);
    while n >= 0x80 {
        out.push(low(n) | 0x80);
        n >>= 7;
    }
    out.push(low(n));
}

#[cfg(test)]
mod tests {
    use super::{NAMES, PAIRS};

    #[test]
    fn the_tables_fit_their_one_byte_tags() {
        assert!(PAIRS.len() <= 64 && NAMES.len() <= 64);
    }
}
