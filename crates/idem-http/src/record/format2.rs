//! Record format 2 (`IDR2`), the one this version writes: format 1's
//! contents in fewer bytes, since a record is kept for every request for a
//! day (the payments debit's record is 107 bytes, against 151 in format 1).
//!
//! | what | how |
//! | --- | --- |
//! | magic | `IDR2` |
//! | status | a varint of the status minus 100 (one byte for 100 to 227) |
//! | headers | a varint of twice their count, plus 1 if the body is compressed; then each header as a field |
//! | body | a varint length, then the body; compressed: the body's length, the compressed length, then the body as raw DEFLATE (RFC 1951) |
//! | trailers, if any | a varint count, then each trailer as a field |
//!
//! A body of at least [`COMPRESS_FROM`] bytes is compressed if that saves
//! an eighth of it or more (JSON of a few kilobytes shrinks to a third or
//! less; an image or a gzipped body does not shrink, and is kept as is).
//! A replay inflates it back to the very bytes recorded, and never past
//! the length the record names.
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

use std::io::{Read, Write};

use bytes::Bytes;
use flate2::write::DeflateEncoder;
use flate2::Compression;

use super::{Reader, RecordedResponse, Unreadable};

/// The least body that is compressed: below it the saving is a few bytes.
pub(super) const COMPRESS_FROM: usize = 1024;

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
    let compressed = compress(body);
    let flag = u64::from(compressed.is_some());
    put_varint(&mut out, headers.len() as u64 * 2 + flag);
    put_each(&mut out, headers);
    match compressed {
        Some(deflated) => {
            put_varint(&mut out, body.len() as u64);
            put_counted(&mut out, &deflated);
        }
        None => put_counted(&mut out, body),
    }
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
    let counted = r.varint("field count")?;
    let headers = each_field(r, whole, counted / 2)?;
    let body = if counted % 2 == 1 {
        let len =
            usize::try_from(r.varint("body length")?).map_err(|_| Unreadable("body length"))?;
        inflate(r.counted("compressed body")?, len)?
    } else {
        whole.slice_ref(r.counted("body")?)
    };
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

/// `body` compressed, if it is long enough and that saves an eighth.
fn compress(body: &[u8]) -> Option<Vec<u8>> {
    if body.len() < COMPRESS_FROM {
        return None;
    }
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(body.len() / 2), Compression::fast());
    encoder.write_all(body).ok()?;
    let deflated = encoder.finish().ok()?;
    (deflated.len() <= body.len() - body.len() / 8).then_some(deflated)
}

/// The body a compressed one stands for: exactly `len` bytes, or the
/// record is refused (inflating stops past `len`, whatever the bytes say).
fn inflate(deflated: &[u8], len: usize) -> Result<Bytes, Unreadable> {
    let mut body = Vec::with_capacity(len.min(1 << 20));
    flate2::read::DeflateDecoder::new(deflated)
        .take(len as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|_| Unreadable("compressed body"))?;
    if body.len() != len {
        return Err(Unreadable("compressed body"));
    }
    Ok(Bytes::from(body))
}

fn put_fields(out: &mut Vec<u8>, fields: &[(&str, &[u8])]) {
    put_varint(out, fields.len() as u64);
    put_each(out, fields);
}

fn put_each(out: &mut Vec<u8>, fields: &[(&str, &[u8])]) {
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
    each_field(r, whole, count)
}

fn each_field(
    r: &mut Reader<'_>,
    whole: &Bytes,
    count: u64,
) -> Result<Vec<(String, Bytes)>, Unreadable> {
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
    use idem_core::Outcome;

    use super::{NAMES, PAIRS};
    use crate::{decode, encode};

    #[test]
    fn the_tables_fit_their_one_byte_tags() {
        assert!(PAIRS.len() <= 64 && NAMES.len() <= 64);
    }

    fn receipts(n: usize) -> Vec<u8> {
        let mut body = b"[".to_vec();
        for i in 0..n {
            let line = format!(r#"{{"debit_id":"dbt_{i:08}","account":"alice","amount":1000}},"#);
            body.extend_from_slice(line.as_bytes());
        }
        body.push(b']');
        body
    }

    #[test]
    fn a_large_json_body_is_recorded_compressed_and_replayed_byte_for_byte() {
        let body = receipts(200);
        let record = encode(200, &[("content-type", b"application/json")], &body);
        assert!(
            record.len() < body.len() / 3,
            "{} bytes for a {}-byte body",
            record.len(),
            body.len()
        );
        let back = decode(&record).expect("decodes");
        assert_eq!(back.body, body[..]);
        assert_eq!(back.status, 200);
    }

    #[test]
    fn bodies_that_do_not_shrink_or_are_short_are_kept_as_they_are() {
        // Bytes that do not compress (a linear congruential sequence).
        let mut x: u32 = 1;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                x.to_be_bytes()[0]
            })
            .collect();
        for body in [noise, vec![b'a'; super::COMPRESS_FROM - 1]] {
            let record = encode(200, &[], &body);
            assert!(record.len() > body.len(), "kept whole");
            assert_eq!(decode(&record).expect("decodes").body, body[..]);
        }
    }

    #[test]
    fn a_compressed_body_that_says_another_length_is_refused() {
        let body = receipts(100);
        let record = encode(200, &[], &body).into_bytes();
        // IDR2, status, flagged count, then the body's length (a varint).
        assert_eq!(record[5], 1, "no headers, compressed");
        for forged in [body.len() - 1, body.len() + 1, 1 << 40] {
            let mut bytes = record[..6].to_vec();
            let mut n = forged as u64;
            while n >= 0x80 {
                bytes.push(u8::try_from(n & 0x7f).unwrap_or(0) | 0x80);
                n >>= 7;
            }
            bytes.push(u8::try_from(n).unwrap_or(0));
            let skip = 6 + varint_len(body.len() as u64);
            bytes.extend_from_slice(&record[skip..]);
            let e = decode(&Outcome::new(bytes)).expect_err("refused");
            assert_eq!(e.0, "compressed body", "{forged}");
        }
    }

    fn varint_len(mut n: u64) -> usize {
        let mut len = 1;
        while n >= 0x80 {
            n >>= 7;
            len += 1;
        }
        len
    }
}
