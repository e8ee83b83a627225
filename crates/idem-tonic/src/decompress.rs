//! A compressed request message as the fingerprint and the scope see it:
//! decompressed when its `grpc-encoding` is one idem reads (`gzip`,
//! `deflate`), so that a retry is the same request however the client
//! compressed it this time (grpcio, for one, falls back to no compression
//! with the same key).

use std::borrow::Cow;
use std::io::Read as _;

/// Why a compressed message could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// It decompresses to more than the limit.
    TooLarge,
    /// It is not valid data of its encoding.
    Corrupt(&'static str),
}

/// The message as the fingerprint sees it and whether it is still
/// compressed: decompressed (to at most `limit` bytes) when `encoding` is
/// `gzip` or `deflate`, else as sent.
pub(crate) fn readable<'a>(
    encoding: Option<&[u8]>,
    bytes: &'a [u8],
    limit: usize,
) -> Result<(Cow<'a, [u8]>, bool), Unreadable> {
    let reader: Box<dyn std::io::Read + '_> = match encoding {
        Some(b"gzip") => Box::new(flate2::read::GzDecoder::new(bytes)),
        Some(b"deflate") => Box::new(flate2::read::ZlibDecoder::new(bytes)),
        _ => return Ok((Cow::Borrowed(bytes), true)),
    };
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|_| Unreadable::Corrupt("the request's compressed message does not decompress"))?;
    if out.len() > limit {
        return Err(Unreadable::TooLarge);
    }
    Ok((Cow::Owned(out), false))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).expect("write");
        e.finish().expect("finish")
    }

    #[test]
    fn gzip_and_deflate_are_read_others_kept_and_bombs_refused() {
        let message = b"\x0a\x03ann\x10\x64";
        let zipped = gzip(message);
        let (read, still) = readable(Some(b"gzip"), &zipped, 64).expect("gzip");
        assert_eq!((&read[..], still), (&message[..], false));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(message).expect("write");
        let deflated = z.finish().expect("finish");
        let (read, still) = readable(Some(b"deflate"), &deflated, 64).expect("deflate");
        assert_eq!((&read[..], still), (&message[..], false));
        let (kept, still) = readable(Some(b"snappy"), b"xyz", 64).expect("kept");
        assert_eq!((&kept[..], still), (&b"xyz"[..], true));
        assert_eq!(
            readable(Some(b"gzip"), &gzip(&[0; 10_000]), 1024),
            Err(Unreadable::TooLarge)
        );
        assert!(matches!(
            readable(Some(b"gzip"), b"not gzip", 64),
            Err(Unreadable::Corrupt(_))
        ));
    }
}
