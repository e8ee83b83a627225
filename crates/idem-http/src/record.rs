//! Recorded responses: a compact binary form of status, end-to-end headers,
//! body and trailers, read back byte for byte.
//!
//! Each record names its format in its first four bytes: `IDR` and the
//! format's number. This version writes format 2 (lengths as varints, the
//! commonest headers as one byte: [`format2`]) and reads formats 1 and 2,
//! so that records written before it still replay; a later format takes the
//! next digit, so that this version, meeting one, says so
//! ([`Unreadable::is_newer_format`]) instead of misreading it.

mod format1;
mod format2;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use idem_core::Outcome;

/// The format this version writes, and the newest it reads.
pub const RECORD_FORMAT: u8 = 2;

/// What [`Unreadable`] says of a record in a format newer than this
/// version's.
const NEWER_FORMAT: &str = "written in a newer record format by a newer version of idem";

/// Headers that describe one connection, not the response (RFC 9110 §7.6.1),
/// and framing headers the server sets again for the replayed body.
const LEFT_OUT: [&str; 9] = [
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
    let kept: Vec<(&str, &[u8])> = headers
        .iter()
        .copied()
        .filter(|(n, _)| {
            !LEFT_OUT.iter().any(|h| n.eq_ignore_ascii_case(h))
                && !named_in_connection
                    .iter()
                    .any(|h| n.eq_ignore_ascii_case(h))
        })
        .collect();
    Outcome::new(format2::write(status, &kept, body, trailers))
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

impl RecordedResponse {
    /// The recorded response as an `http` response, its body made by `body`
    /// of the recorded body and trailers (`None` when none were recorded,
    /// as for every HTTP answer).
    ///
    /// # Errors
    ///
    /// The part that is not a valid status, header name or header value.
    pub fn into_response<B>(
        self,
        body: impl FnOnce(Bytes, Option<HeaderMap>) -> B,
    ) -> Result<http::Response<B>, Unreadable> {
        let status = StatusCode::from_u16(self.status).map_err(|_| Unreadable("status"))?;
        let headers = header_map(self.headers)?;
        let trailers = if self.trailers.is_empty() {
            None
        } else {
            Some(header_map(self.trailers)?)
        };
        let mut response = http::Response::new(body(self.body, trailers));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

/// Recorded fields as a header map, every value in order; each value is a
/// slice of the record, not a copy.
fn header_map(fields: Vec<(String, Bytes)>) -> Result<HeaderMap, Unreadable> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for (name, value) in fields {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| Unreadable("header name"))?;
        let value =
            HeaderValue::from_maybe_shared(value).map_err(|_| Unreadable("header value"))?;
        map.append(name, value);
    }
    Ok(map)
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

/// Reads a record front to back; every read is bounds-checked.
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

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Unreadable> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// An unsigned LEB128 varint of at most 64 bits.
    fn varint(&mut self, what: &'static str) -> Result<u64, Unreadable> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [b] = self.array::<1>(what)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(Unreadable(what));
            }
            value |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Unreadable(what))
    }

    /// A varint length, then that many bytes.
    fn counted(&mut self, what: &'static str) -> Result<&'a [u8], Unreadable> {
        let n = usize::try_from(self.varint(what)?).map_err(|_| Unreadable(what))?;
        self.take(n, what)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Decodes a recorded response, of any format up to [`RECORD_FORMAT`].
pub fn decode(outcome: &Outcome) -> Result<RecordedResponse, Unreadable> {
    // The record's own bytes, shared: neither body nor values are copied.
    let whole = outcome.shared();
    let mut r = Reader(&whole);
    let recorded = match r.take(4, "magic")? {
        m if m == format2::MAGIC => format2::read(&mut r, &whole)?,
        m if m == format1::MAGIC => format1::read(&mut r, &whole)?,
        [b'I', b'D', b'R', n] if n.is_ascii_digit() && *n > b'0' + RECORD_FORMAT => {
            return Err(Unreadable(NEWER_FORMAT))
        }
        _ => return Err(Unreadable("not a recorded HTTP response")),
    };
    if !(100..=999).contains(&recorded.status) {
        return Err(Unreadable("status"));
    }
    if !r.is_empty() {
        return Err(Unreadable("trailing bytes"));
    }
    Ok(recorded)
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
            ("content-type", b"application/json"),
        ];
        let mut expected = b"IDR2\x65\x06".to_vec();
        expected.extend_from_slice(b"\x40\x0atext/plain");
        expected.extend_from_slice(b"\x00\x03x-a\x011");
        expected.extend_from_slice(b"\x80");
        expected.extend_from_slice(b"\x02ok");
        assert_eq!(encode(201, &headers, b"ok").as_bytes(), &expected[..]);
        expected.extend_from_slice(b"\x01\x87");
        let trailers: Vec<(&str, &[u8])> = vec![("grpc-status", b"0")];
        assert_eq!(
            encode_with_trailers(201, &headers, b"ok", &trailers).as_bytes(),
            &expected[..]
        );
    }

    #[test]
    fn records_written_in_format_1_still_read() {
        // As versions before format 2 wrote them (pinned bytes).
        let mut v1 = b"IDR1\x00\xc9\x00\x00\x00\x02".to_vec();
        v1.extend_from_slice(b"\x00\x0ccontent-type\x00\x00\x00\x0atext/plain");
        v1.extend_from_slice(b"\x00\x03x-a\x00\x00\x00\x011");
        v1.extend_from_slice(b"\x00\x00\x00\x00\x00\x00\x00\x02ok");
        let plain = decode(&Outcome::new(v1.clone())).expect("format 1 reads");
        let headers: Vec<(&str, &[u8])> = vec![("content-type", b"text/plain"), ("x-a", b"1")];
        assert_eq!(plain, decode(&encode(201, &headers, b"ok")).expect("reads"));
        v1.extend_from_slice(b"\x00\x00\x00\x01\x00\x0bgrpc-status\x00\x00\x00\x010");
        let trailed = decode(&Outcome::new(v1)).expect("format 1 with trailers reads");
        assert_eq!(
            trailed.trailers,
            vec![("grpc-status".to_owned(), Bytes::from_static(b"0"))]
        );
    }

    #[test]
    fn the_payments_debit_is_recorded_in_107_bytes() {
        let body = br#"{"debit_id":"dbt_0000000000000000_1764000000000000","account":"alice","amount":1000,"balance":9000}"#;
        assert_eq!(body.len(), 99);
        let record = encode(201, &[("content-type", b"application/json")], body);
        assert_eq!(record.len(), 107);
    }

    #[test]
    fn every_status_header_and_size_round_trips() {
        let long = vec![7u8; 70_000];
        for status in [100, 200, 201, 227, 228, 404, 503, 999] {
            let headers: Vec<(&str, &[u8])> = vec![
                ("content-type", b"application/grpc"),
                ("location", b"/debits/1"),
                ("x-long", &long),
                ("Content-Type", b"application/json"),
            ];
            let trailers: Vec<(&str, &[u8])> =
                vec![("grpc-status", b"0"), ("grpc-message", b"ok"), ("x-t", b"")];
            let back =
                decode(&encode_with_trailers(status, &headers, &long, &trailers)).expect("decodes");
            assert_eq!(back.status, status);
            let got: Vec<(&str, &[u8])> = back
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), &v[..]))
                .collect();
            assert_eq!(got, headers);
            let got: Vec<(&str, &[u8])> = back
                .trailers
                .iter()
                .map(|(n, v)| (n.as_str(), &v[..]))
                .collect();
            assert_eq!(got, trailers);
            assert_eq!(back.body, long[..]);
        }
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
        newer[3] = b'3';
        let e = decode(&Outcome::new(newer)).expect_err("not read");
        assert!(e.is_newer_format(), "{e}");
        let e = decode(&Outcome::new(b"IDRx-and-so-on".to_vec())).expect_err("not read");
        assert!(!e.is_newer_format(), "{e}");
        assert!(
            decode(&encode(200, &[], b"hello")).is_ok(),
            "format 2 reads"
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
