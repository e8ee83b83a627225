//! Idempotency keys, scopes and the record address derived from both.

use std::fmt;

use sha2::{Digest as _, Sha256};

use crate::digest::{put_field, Digest, DigestKind};

/// The longest idempotency key accepted, in characters (after unquoting).
pub const MAX_KEY_LEN: usize = 255;

/// A client's idempotency key: 1 to 255 visible ASCII characters.
///
/// [`IdempotencyKey::parse`] accepts the key either as a bare token
/// (`8e03978e-40d5-43e8-bc93-6894a57f9324`) or in the RFC 8941 `sf-string` form
/// that the IETF Idempotency-Key draft specifies (`"8e03978e-..."`, with `\"` and
/// `\\` escapes). Both forms of the same characters are the same key. A value
/// that opens with `"` is always read as a quoted string.
///
/// The key is never stored: stores see only the [`RecordId`] digest of scope and
/// key. Its `Debug` form shows it, since keys are not secrets to the server that
/// logs them, but idem itself logs only the digest.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

/// Why an idempotency key was rejected. Each variant names the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key has no characters.
    #[error("idempotency key is empty: it must have 1 to 255 visible ASCII characters")]
    Empty,
    /// The key is longer than [`MAX_KEY_LEN`].
    #[error("idempotency key is {len} characters long: at most 255 are allowed")]
    TooLong {
        /// The length found.
        len: usize,
    },
    /// A byte outside visible ASCII (`!` to `~`) was found.
    #[error(
        "idempotency key has a byte 0x{byte:02x} at position {position}: only visible ASCII \
         characters (0x21 to 0x7e) are allowed"
    )]
    InvalidCharacter {
        /// Zero-based byte position in the raw value.
        position: usize,
        /// The offending byte.
        byte: u8,
    },
    /// A quoted key has no closing quote, or characters after it.
    #[error("idempotency key opens a quoted string that is not closed by a final `\"`")]
    UnterminatedQuote,
    /// A backslash in a quoted key is followed by something other than `"` or `\`.
    #[error(
        "idempotency key has an invalid escape at position {position}: inside quotes only \
         `\\\"` and `\\\\` are allowed"
    )]
    InvalidEscape {
        /// Zero-based byte position of the backslash in the raw value.
        position: usize,
    },
}

impl IdempotencyKey {
    /// Parses a key from a header value or message attribute, as a bare token or
    /// an RFC 8941 quoted string.
    ///
    /// ```
    /// use idem_core::IdempotencyKey;
    /// let bare = IdempotencyKey::parse("order-42").unwrap();
    /// let quoted = IdempotencyKey::parse("\"order-42\"").unwrap();
    /// assert_eq!(bare, quoted);
    /// assert!(IdempotencyKey::parse("").is_err());
    /// ```
    pub fn parse(raw: &str) -> Result<Self, KeyError> {
        Self::parse_bytes(raw.as_bytes())
    }

    /// Like [`parse`](Self::parse), from raw bytes (an HTTP header value need not be UTF-8).
    pub fn parse_bytes(raw: &[u8]) -> Result<Self, KeyError> {
        if raw.first() == Some(&b'"') {
            return Self::parse_quoted(raw);
        }
        if raw.is_empty() {
            return Err(KeyError::Empty);
        }
        if let Some(position) = raw.iter().position(|b| !is_visible(*b)) {
            return Err(KeyError::InvalidCharacter {
                position,
                byte: raw[position],
            });
        }
        if raw.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong { len: raw.len() });
        }
        // Every byte is visible ASCII, so this is valid UTF-8.
        match std::str::from_utf8(raw) {
            Ok(text) => Ok(Self(text.to_owned())),
            Err(e) => Err(KeyError::InvalidCharacter {
                position: e.valid_up_to(),
                byte: raw.get(e.valid_up_to()).copied().unwrap_or_default(),
            }),
        }
    }

    fn parse_quoted(raw: &[u8]) -> Result<Self, KeyError> {
        let mut out = String::with_capacity(raw.len());
        let mut i = 1;
        loop {
            let Some(&b) = raw.get(i) else {
                return Err(KeyError::UnterminatedQuote);
            };
            match b {
                b'"' => {
                    if i + 1 != raw.len() {
                        return Err(KeyError::UnterminatedQuote);
                    }
                    break;
                }
                b'\\' => match raw.get(i + 1) {
                    Some(&e @ (b'"' | b'\\')) => {
                        out.push(char::from(e));
                        i += 2;
                    }
                    Some(_) => return Err(KeyError::InvalidEscape { position: i }),
                    None => return Err(KeyError::UnterminatedQuote),
                },
                // Inside an sf-string, a space is allowed; the rest must be visible.
                b' ' => {
                    out.push(' ');
                    i += 1;
                }
                b if is_visible(b) => {
                    out.push(char::from(b));
                    i += 1;
                }
                byte => return Err(KeyError::InvalidCharacter { position: i, byte }),
            }
        }
        if out.is_empty() {
            return Err(KeyError::Empty);
        }
        if out.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong { len: out.len() });
        }
        Ok(Self(out))
    }

    /// The key's characters (unquoted).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_visible(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IdempotencyKey").field(&self.0).finish()
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for IdempotencyKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<&str> for IdempotencyKey {
    type Error = KeyError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Self::parse(s)
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = KeyError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

/// The namespace of a key: the principal or tenant that owns it (an account, an
/// API key, a tenant id). The same key under two scopes is two operations.
///
/// [`Scope::global`] is the empty scope, for services where keys are unique
/// across all clients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(String);

impl Scope {
    /// A scope named by any string (an account id, a tenant, a queue name).
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// The empty scope shared by every caller.
    pub fn global() -> Self {
        Self(String::new())
    }

    /// The scope's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Scope {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for Scope {
    fn from(s: String) -> Self {
        Self(s)
    }
}

/// The address of a record in a store: a SHA-256 digest of scope and key.
///
/// Stores hold this digest, never the raw key or scope, so that reading a store
/// does not reveal keys, and guessing a key does not reveal another scope's answer.
pub type RecordId = Digest<RecordKind>;

/// The kind of a [`RecordId`].
#[derive(Debug)]
pub enum RecordKind {}

impl DigestKind for RecordKind {
    const NAME: &'static str = "RecordId";
}

impl Digest<RecordKind> {
    /// The address of `key` under `scope`.
    pub fn new(scope: &Scope, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        put_field(&mut h, b"idem/record/v1");
        put_field(&mut h, scope.0.as_bytes());
        put_field(&mut h, key.0.as_bytes());
        Self::from_bytes(h.finalize().into())
    }
}

/// The keys of the downstream calls made for `key` under `scope`
/// ([`Claim::downstream_key`](crate::Claim::downstream_key)): digests in
/// their own domain, so that none is a record's address or derivable from
/// one. The digest of the domain, scope and key is taken once per request,
/// and each call site's key continues it: a claim holds this instead of
/// copies of its scope and key.
#[derive(Clone)]
pub(crate) struct DownstreamKeys(Sha256);

impl DownstreamKeys {
    pub(crate) fn new(scope: &Scope, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        put_field(&mut h, b"idem/downstream/v1");
        put_field(&mut h, scope.0.as_bytes());
        put_field(&mut h, key.0.as_bytes());
        Self(h)
    }

    /// The key of the call site `call`.
    pub(crate) fn key(&self, call: &str) -> IdempotencyKey {
        let mut h = self.0.clone();
        put_field(&mut h, call.as_bytes());
        let digest: [u8; 32] = h.finalize().into();
        let mut text = String::with_capacity(5 + 64);
        text.push_str("idem-");
        for b in digest {
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 15)]));
        }
        IdempotencyKey(text)
    }
}

impl fmt::Debug for DownstreamKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DownstreamKeys").finish_non_exhaustive()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downstream_keys_are_stable_per_request_and_distinct_per_call() {
        let k = |scope: &str, key: &str, call: &str| {
            DownstreamKeys::new(&Scope::new(scope), &IdempotencyKey::parse(key).unwrap()).key(call)
        };
        let charge = k("alice", "k-1", "charge");
        // Pinned: a derivation that changed would give a takeover after an
        // upgrade another key than its first attempt's, and the downstream
        // service would apply the effect twice.
        assert_eq!(
            charge.as_str(),
            "idem-f180a558d74e7a3c949e822e8c2a30beeb282513b7da621d05db93f240b06bdb"
        );
        assert_eq!(charge, k("alice", "k-1", "charge"));
        assert_eq!(charge.as_str().len(), 69);
        assert!(IdempotencyKey::parse(charge.as_str()).is_ok());
        assert_ne!(charge, k("alice", "k-1", "refund"));
        assert_ne!(charge, k("bob", "k-1", "charge"));
        assert_ne!(charge, k("alice", "k-2", "charge"));
        // Length-prefixed fields: moving a byte from one field to the next is another key.
        assert_ne!(k("ab", "c", "x"), k("a", "bc", "x"));
        // Not the record's address in hex.
        let id = RecordId::new(&Scope::new("alice"), &IdempotencyKey::parse("k-1").unwrap());
        assert!(!charge.as_str().contains(&id.to_hex()));
    }

    #[test]
    fn bare_and_quoted_forms() {
        assert_eq!(IdempotencyKey::parse("abc").unwrap().as_str(), "abc");
        assert_eq!(IdempotencyKey::parse("\"abc\"").unwrap().as_str(), "abc");
        assert_eq!(
            IdempotencyKey::parse(r#""a\"b\\c""#).unwrap().as_str(),
            r#"a"b\c"#
        );
        assert_eq!(IdempotencyKey::parse("\"a b\"").unwrap().as_str(), "a b");
    }

    #[test]
    fn rejections_name_the_rule() {
        assert_eq!(IdempotencyKey::parse(""), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::parse("\"\""), Err(KeyError::Empty));
        assert_eq!(
            IdempotencyKey::parse("a b"),
            Err(KeyError::InvalidCharacter {
                position: 1,
                byte: b' '
            })
        );
        assert_eq!(
            IdempotencyKey::parse("caf\u{e9}"),
            Err(KeyError::InvalidCharacter {
                position: 3,
                byte: 0xc3
            })
        );
        assert_eq!(
            IdempotencyKey::parse("\"abc"),
            Err(KeyError::UnterminatedQuote)
        );
        assert_eq!(
            IdempotencyKey::parse("\"abc\"x"),
            Err(KeyError::UnterminatedQuote)
        );
        assert_eq!(
            IdempotencyKey::parse(r#""a\nb""#),
            Err(KeyError::InvalidEscape { position: 2 })
        );
        let msg = IdempotencyKey::parse(&"k".repeat(256))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("256") && msg.contains("255"), "{msg}");
    }

    #[test]
    fn length_limit_is_inclusive() {
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert_eq!(
            IdempotencyKey::parse(&"k".repeat(256)),
            Err(KeyError::TooLong { len: 256 })
        );
        let quoted = format!("\"{}\"", "k".repeat(255));
        assert!(IdempotencyKey::parse(&quoted).is_ok());
    }

    #[test]
    fn record_id_separates_scope_and_key() {
        let k = |s: &str| IdempotencyKey::parse(s).unwrap();
        let a = RecordId::new(&Scope::new("ab"), &k("c"));
        let b = RecordId::new(&Scope::new("a"), &k("bc"));
        assert_ne!(a, b, "length prefixes keep scope and key apart");
        assert_eq!(a, RecordId::new(&Scope::new("ab"), &k("\"c\"")));
        assert_eq!(a.to_hex().len(), 64);
    }
}
