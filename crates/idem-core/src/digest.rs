//! `Digest`: a SHA-256 digest naming something, typed by what it names
//! ([`Fingerprint`](crate::Fingerprint), [`RecordId`](crate::RecordId)).

use std::fmt;
use std::marker::PhantomData;

use sha2::{Digest as _, Sha256};

/// What a [`Digest`] names: its name in `Debug` output.
pub trait DigestKind {
    /// The name, such as `"Fingerprint"`.
    const NAME: &'static str;
}

/// 32 digest bytes of kind `K`: two digests of different kinds never compare.
pub struct Digest<K> {
    bytes: [u8; 32],
    kind: PhantomData<fn() -> K>,
}

impl<K> Digest<K> {
    /// Wraps 32 digest bytes read back from a store.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self {
            bytes,
            kind: PhantomData,
        }
    }

    /// The digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// The digest as 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        self.push_hex(&mut s);
        s
    }

    /// The digest spelled as 64 hex characters (as [`to_hex`](Self::to_hex)
    /// writes them; either case), or `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let hex = hex.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        };
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            *byte = digit(pair[0])? << 4 | digit(pair[1])?;
        }
        Some(Self::from_bytes(bytes))
    }

    /// Appends the 64 lowercase hex characters to `out`.
    pub fn push_hex(&self, out: &mut String) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for b in self.bytes {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
        }
    }
}

// By hand: derives would ask `K` for what only the bytes need.
impl<K> Clone for Digest<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Digest<K> {}

impl<K> PartialEq for Digest<K> {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl<K> Eq for Digest<K> {}

impl<K> std::hash::Hash for Digest<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

impl<K> PartialOrd for Digest<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Digest<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes.cmp(&other.bytes)
    }
}

impl<K: DigestKind> fmt::Debug for Digest<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", K::NAME, self.to_hex())
    }
}

impl<K> fmt::Display for Digest<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Writes one length-prefixed field, so that no two field lists hash alike.
/// Where a digest's input goes: the hash itself, or a buffer that is
/// hashed later in one piece (the same bytes, so the same digest).
pub(crate) trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A field: its length (8 bytes, big-endian), then its bytes.
pub(crate) fn put_field(h: &mut impl Sink, bytes: &[u8]) {
    h.put(&(bytes.len() as u64).to_be_bytes());
    h.put(bytes);
}

#[cfg(test)]
mod tests {
    use crate::{IdempotencyKey, RecordId, Scope};

    #[test]
    fn a_digest_reads_back_from_its_hex_and_nothing_else_does() {
        let id = RecordId::new(
            &Scope::new("alice"),
            &IdempotencyKey::parse("k-1").expect("key"),
        );
        let hex = id.to_hex();
        assert_eq!(RecordId::from_hex(&hex), Some(id));
        assert_eq!(RecordId::from_hex(&hex.to_uppercase()), Some(id));
        assert_eq!(RecordId::from_hex(&hex[..62]), None, "too short");
        assert_eq!(RecordId::from_hex(&format!("{hex}00")), None, "too long");
        assert_eq!(
            RecordId::from_hex(&format!("+f{}", &hex[2..])),
            None,
            "a sign"
        );
        assert_eq!(RecordId::from_hex(&"g".repeat(64)), None, "not hex");
    }
}
