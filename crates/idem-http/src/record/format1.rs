//! Record format 1 (`IDR1`), written by versions before format 2 and read
//! by this one, so that their records still replay:
//!
//! | bytes | what |
//! | --- | --- |
//! | 4 | `IDR1` |
//! | 2 | the status, big-endian |
//! | 4, then each | the header count; each header a 2-byte name length, the name, a 4-byte value length, the value |
//! | 8, then the body | the body's length and the body |
//! | the rest, if any | the trailers, counted as the headers are |
//!
//! Every length is big-endian.

use bytes::Bytes;

use super::{Reader, RecordedResponse, Unreadable};

/// The first four bytes of a format 1 record.
pub(super) const MAGIC: &[u8; 4] = b"IDR1";

/// Reads what follows the magic.
pub(super) fn read(r: &mut Reader<'_>, whole: &Bytes) -> Result<RecordedResponse, Unreadable> {
    let status = u16::from_be_bytes(r.array("status")?);
    let headers = fields(r, whole)?;
    let n = usize::try_from(u64::from_be_bytes(r.array("body length")?))
        .map_err(|_| Unreadable("body length"))?;
    let body = whole.slice_ref(r.take(n, "body")?);
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

/// A count, then that many (name, value) fields, each value a slice of
/// `whole`, the record read.
fn fields(r: &mut Reader<'_>, whole: &Bytes) -> Result<Vec<(String, Bytes)>, Unreadable> {
    let count = u32::from_be_bytes(r.array("field count")?);
    let mut fields = Vec::new();
    for _ in 0..count {
        let n = usize::from(u16::from_be_bytes(r.array("field name length")?));
        let name = std::str::from_utf8(r.take(n, "field name")?)
            .map_err(|_| Unreadable("field name"))?
            .to_owned();
        let n = usize::try_from(u32::from_be_bytes(r.array("field value length")?))
            .map_err(|_| Unreadable("field value length"))?;
        fields.push((name, whole.slice_ref(r.take(n, "field value")?)));
    }
    Ok(fields)
}
