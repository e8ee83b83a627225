//! Idempotency keys on the caller's side: how one is minted for a logical
//! request, and how a caller names its own.

use std::fmt;
use std::sync::Arc;

/// How the middleware mints a key for a logical request that has none.
#[derive(Clone, Default)]
pub enum KeyMint {
    /// A random UUID (version 4): nothing about the request shows in it.
    #[default]
    UuidV4,
    /// A time-ordered UUID (version 7): keys sort by when they were minted,
    /// which keeps a store's index of them compact.
    UuidV7,
    /// The caller's own generator.
    Custom(Arc<dyn Fn() -> String + Send + Sync>),
}

impl KeyMint {
    /// A new key.
    pub fn mint(&self) -> String {
        match self {
            KeyMint::UuidV4 => uuid::Uuid::new_v4().to_string(),
            KeyMint::UuidV7 => uuid::Uuid::now_v7().to_string(),
            KeyMint::Custom(mint) => mint(),
        }
    }
}

impl fmt::Debug for KeyMint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyMint::UuidV4 => f.write_str("UuidV4"),
            KeyMint::UuidV7 => f.write_str("UuidV7"),
            KeyMint::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The caller's own key for one logical request, as a request extension
/// (`RequestBuilder::with_extension(Key::new(..))`): the middleware sends it
/// instead of minting one. Keep it with the work it names (an order's id,
/// a queue message's id) and send it again when that work is retried
/// later, after a crash say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key(pub String);

impl Key {
    /// The key `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }
}

/// The name of a downstream call site, as a request extension, for a
/// middleware that propagates keys
/// ([`IdempotentRetries::propagate`](crate::IdempotentRetries::propagate)):
/// the key is derived from the current claim and this name. Name each call
/// an operation makes once (`"charge"`, `"ship"`); without it the name is
/// the method and URL, which must then not carry per-call values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite(pub String);

impl CallSite {
    /// The call site `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
}
