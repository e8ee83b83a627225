//! Recorded responses: a compact binary form of status, end-to-end headers
//! and body, read back byte for byte.
//!
//! Each record names its format in its first four bytes: `IDR` and the
//! format's number, `1` today. A later format takes the next digit, so that
//! this version, meeting one, says so ([`Unreadable::is_newer_format`])
//! instead of misreading it; a later version keeps reading format 1.

use bytes::Bytes;
use idem_core::Outcome;

const MAGIC: &[u8; 4] = b"IDR1";

/// The format this version writes, and the newest it reads.
pub const RECORD_FORMAT: u8 = 1;

/// What [`Unreadable`] says of a record in a format newer than this
/// version's.
const NEWER_FORMAT: &str = "written in a newer record format by a newer version of idem";

/// Headers that describe one connection, not the response (RFC 9110 §7.6.1),
/// and framing headers the server sets again for the replayed body.
const NOT_RECORDED: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// Encodes a response the way idem records it: status, end-to-end headers
/// (every value, in the order given; names lowercase, as the `http` crate
/// keeps them) and body. Hop-by-hop headers (the fixed list,
/// `Content-Length`, and any named in `Connection`) are left out. A handler
/// that completes its record inside its own database transaction encodes
/// the response it returns with this, so that retries replay it.
pub fn encode(status: u16, headers: &[(&str, &[u8])], body: &[u8]) -> Outcome {
    encode_with_trailers(status, headers, body, &[])
}

/// [`encode`], with the trailers that followed the body (gRPC's
/// `grpc-status` and trailing metadata), every value, in order. Without
/// trailers the record is exactly [`encode`]'s.
pub fn encode_with_trailers(
    status: u16,
    headers: &[(&str, &[u8])],
    body: &[u8],
    trailers: &[(&str, &[u8])],
) -> Outcome {
    let named_in_connection: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .filter_map(|(_, v)| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    // Read twice, for the size and for the bytes, rather than collected.
    let kept = || {
        headers.iter().copied().filter(|(n, _)| {
            !NOT_RECORDED.iter().any(|h| n.eq_ignore_ascii_case(h))
                && !named_in_connection
                    .iter()
                    .any(|h| n.eq_ignore_ascii_case(h))
        })
    };
    let size = 4 + 2 + fields_size(kept()) + 8 + body.len() + fields_size(trailers.iter().copied());
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&status.to_be_bytes());
    put_fields(&mut out, kept());
    out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    out.extend_from_slice(body);
    if !trailers.is_empty() {
        put_fields(&mut out, trailers.iter().copied());
    }
    Outcome::new(out)
}

/// The bytes [`put_fields`] writes for `fields`.
fn fields_size<'a>(fields: impl Iterator<Item = (&'a str, &'a [u8])>) -> usize {
    4 + fields
        .map(|(n, v)| 2 + n.len() + 4 + v.len())
        .sum::<usize>()
}

fn put_fields<'a>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'a str, &'a [u8])> + Clone) {
    out.extend_from_slice(
        &u32::try_from(fields.clone().count())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    for (name, value) in fields {
        let name = name.as_bytes();
        // Header names are short and values are bounded by the server's
        // header limits, far below these widths.
        out.extend_from_slice(&u16::try_from(name.len()).unwrap_or(u16::MAX).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(value);
    }
}

/// A recorded response, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedResponse {
    /// The status code.
    pub status: u16,
    /// The end-to-end headers, every value, in order (each value a slice
    /// of the record).
    pub headers: Vec<(String, Bytes)>,
    /// The body: a slice of the record, shared, not copied.
    pub body: Bytes,
    /// The trailers, every value, in order (empty for most HTTP responses).
    pub trailers: Vec<(String, Bytes)>,
}

/// Why a record could not be read back: the part that was wrong.
#[derive(Debug)]
pub struct Unreadable(pub &'static str);

impl Unreadable {
    /// Whether the record is not broken but newer: written by a newer
    /// version of idem in a format this one does not read (mid-rollout, an
    /// instance of that version reads it).
    pub fn is_newer_format(&self) -> bool {
        self.0 == NEWER_FORMAT
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the recorded response cannot be read ({})", self.0)
    }
}

impl std::error::Error for Unreadable {}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Unreadable> {
        if self.0.len() < n {
            return Err(Unreadable(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    /// A count, then that many (name, value) fields, each value a slice of
    /// `whole`, the record this reads.
    fn fields(&mut self, whole: &Bytes) -> Result<Vec<(String, Bytes)>, Unreadable> {
        let count = u32::from_be_bytes(self.array("field count")?);
        let mut fields = Vec::new();
        for _ in 0..count {
            let n = usize::from(u16::from_be_bytes(self.array("field name length")?));
            let name = std::str::from_utf8(self.take(n, "field name")?)
                .map_err(|_| Unreadable("field name"))?
                .to_owned();
            let n = usize::try_from(u32::from_be_bytes(self.array("field value length")?))
                .map_err(|_| Unreadable("field value length"))?;
            fields.push((name, whole.slice_ref(self.take(n, "field value")?)));
        }
        Ok(fields)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Unreadable> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
}

/// Decodes a recorded response.
pub fn decode(outcome: &Outcome) -> Result<RecordedResponse, Unreadable> {
    // The record's own bytes, shared: neither body nor values are copied.
    let whole = outcome.shared();
    let mut r = Reader(&whole);
    let magic = r.take(4, "magic")?;
    if magic != MAGIC {
        return Err(match magic {
            [b'I', b'D', b'R', n] if n.is_ascii_digit() && *n > b'0' + RECORD_FORMAT => {
                Unreadable(NEWER_FORMAT)
            }
            _ => Unreadable("not a recorded HTTP response"),
        });
    }
    let status = u16::from_be_bytes(r.array("status")?);
    if !(100..=999).contains(&status) {
        return Err(Unreadable("status"));
    }
    let headers = r.fields(&whole)?;
    let n = usize::try_from(u64::from_be_bytes(r.array("body length")?))
        .map_err(|_| Unreadable("body length"))?;
    let body = whole.slice_ref(r.take(n, "body")?);
    let trailers = if r.0.is_empty() {
        Vec::new()
    } else {
        r.fields(&whole)?
    };
    if !r.0.is_empty() {
        return Err(Unreadable("trailing bytes"));
    }
    Ok(RecordedResponse {
        status,
        headers,
        body,
        trailers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_every_end_to_end_header_in_order() {
        let headers: Vec<(&str, &[u8])> = vec![
            ("content-type", b"application/json"),
            ("set-cookie", b"a=1"),
            ("set-cookie", b"b=2"),
            ("connection", b"x-trace"),
            ("x-trace", b"hop"),
            ("keep-alive", b"timeout=5"),
            ("content-length", b"3"),
        ];
        let body = [0u8, 255, 10];
        let back = decode(&encode(201, &headers, &body)).expect("decodes");
        assert_eq!(back.status, 201);
        assert_eq!(
            back.headers,
            vec![
                (
                    "content-type".to_owned(),
                    Bytes::from_static(b"application/json")
                ),
                ("set-cookie".to_owned(), Bytes::from_static(b"a=1")),
                ("set-cookie".to_owned(), Bytes::from_static(b"b=2")),
            ]
        );
        assert_eq!(back.body, body[..]);
    }

    #[test]
    fn the_recorded_form_is_pinned_byte_for_byte() {
        // Records outlive a deploy: a form that changed would leave the
        // records written before it unreadable to their retries.
        let headers: Vec<(&str, &[u8])> = vec![
            ("content-type", b"text/plain"),
            ("connection", b"x-hop"),
            ("x-hop", b"1"),
            ("x-a", b"1"),
        ];
        let mut expected = b"IDR1\x00\xc9\x00\x00\x00\x02".to_vec();
        expected.extend_from_slice(b"\x00\x0ccontent-type\x00\x00\x00\x0atext/plain");
        expected.extend_from_slice(b"\x00\x03x-a\x00\x00\x00\x011");
        expected.extend_from_slice(b"\x00\x00\x00\x00\x00\x00\x00\x02ok");
        assert_eq!(encode(201, &headers, b"ok").as_bytes(), &expected[..]);
        expected.extend_from_slice(b"\x00\x00\x00\x01\x00\x0bgrpc-status\x00\x00\x00\x010");
        let trailers: Vec<(&str, &[u8])> = vec![("grpc-status", b"0")];
        assert_eq!(
            encode_with_trailers(201, &headers, b"ok", &trailers).as_bytes(),
            &expected[..]
        );
    }

    #[test]
    fn trailers_round_trip_and_records_without_them_are_unchanged() {
        let headers: Vec<(&str, &[u8])> = vec![("content-type", b"application/grpc")];
        let trailers: Vec<(&str, &[u8])> =
            vec![("grpc-status", b"0"), ("x-a", b"1"), ("x-a", b"2")];
        let back = decode(&encode_with_trailers(
            200,
            &headers,
            b"\0\0\0\0\x01z",
            &trailers,
        ))
        .expect("decodes");
        assert_eq!(back.body, &b"\0\0\0\0\x01z"[..]);
        assert_eq!(
            back.trailers,
            vec![
                ("grpc-status".to_owned(), Bytes::from_static(b"0")),
                ("x-a".to_owned(), Bytes::from_static(b"1")),
                ("x-a".to_owned(), Bytes::from_static(b"2")),
            ]
        );
        assert_eq!(
            encode_with_trailers(200, &headers, b"x", &[]).as_bytes(),
            encode(200, &headers, b"x").as_bytes(),
            "records made before trailers existed read the same"
        );
    }

    #[test]
    fn a_record_of_a_newer_format_is_told_apart_from_a_broken_one() {
        let mut newer = encode(200, &[], b"hello").into_bytes();
        newer[3] = b'2';
        let e = decode(&Outcome::new(newer)).expect_err("not read");
        assert!(e.is_newer_format(), "{e}");
        let e = decode(&Outcome::new(b"IDRx-and-so-on".to_vec())).expect_err("not read");
        assert!(!e.is_newer_format(), "{e}");
        assert!(
            decode(&encode(200, &[], b"hello")).is_ok(),
            "format 1 reads"
        );
    }

    #[test]
    fn truncated_records_are_refused_not_panicked_on() {
        let outcome = encode(200, &[], b"hello");
        let bytes = outcome.as_bytes();
        for cut in 0..bytes.len() {
            assert!(
                decode(&Outcome::new(bytes[..cut].to_vec())).is_err(),
                "cut at {cut}"
            );
        }
        assert!(decode(&Outcome::new(b"junk-junk-junk".to_vec())).is_err());
    }
}
