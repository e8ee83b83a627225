//! Where a record lives: the two key layouts every store reads, the one it
//! writes new records under, and its trace's key.
//!
//! - **Compact** (`<prefix>{<slot tag>}<the id's first 24 bytes, base64url>`),
//!   the default: 29 bytes shorter than the hex key (42 bytes with the
//!   default prefix, which the allocator rounds to 48, against 71 rounded to
//!   80). The version before this one reads it too (and wrote it when told
//!   to). Its hash tag is the shortest alphanumeric string in the hex
//!   key's slot ([`crate::slot::tag_of`]), so a record's two keys (and the
//!   keys [`RedisStore::tagged_key`] names) share one slot: a script reads
//!   both atomically, on Redis Cluster too.
//!
//! The scripts that look for a record (begin, peek, inspect, remove) get
//! its four keys, the layout the store writes first (`KEYS[1]`, its trace
//! `KEYS[2]`), the other after (`KEYS[3]`, `KEYS[4]`), and act on whichever
//! holds it; a record is never live under both, since a claim looks under
//! both first. The scripts of a claim's holder (complete, commit, release,
//! renew) get only the written layout's keys (and with compact keys the hex
//! key, for the wake-up): a store's own claim is there. Wake-ups name the hex key
//! whatever the layout, as earlier versions do, so instances of either
//! version wake each other's waiters.

use base64::Engine as _;
use idem_core::RecordId;

use crate::slot;
use crate::RedisStore;

/// The key layout a store writes new records under
/// ([`RedisStore::with_key_layout`]); it reads records under both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyLayout {
    /// `<prefix>{<64 hex digits>}`: read by every version of idem. Write it
    /// while an instance of a version before compact keys shares the
    /// store: those look only under the hex key, and a retry that reached
    /// one would run again.
    Hex,
    /// `<prefix>{<slot tag>}<32 base64url characters>`, 29 bytes shorter
    /// (the default). Read by this version and the one before it.
    #[default]
    Compact,
}

/// A record's keys, as the scripts that look for it take them: the layout
/// the store writes (and its trace), then the other (and its trace).
pub(crate) struct RecordKeys([String; 4]);

impl RecordKeys {
    /// The four keys, in the scripts' order.
    pub(crate) fn all(&self) -> [&str; 4] {
        let [a, b, c, d] = &self.0;
        [a, b, c, d]
    }
}

/// A claim's keys, as the scripts its holder calls (complete, commit,
/// release, renew) take them: the record under the layout the store writes
/// (where its own claim put it), its trace, and with compact keys the hex
/// key, which wake-ups name.
pub(crate) struct HolderKeys {
    keys: [String; 3],
    len: usize,
}

impl HolderKeys {
    /// The two or three keys, in the scripts' order.
    pub(crate) fn all(&self) -> Vec<&str> {
        self.keys[..self.len].iter().map(String::as_str).collect()
    }

    /// Always three (the hex key last, the record's own on the hex layout),
    /// for scripts that take more keys after them.
    pub(crate) fn three(&self) -> [&str; 3] {
        let [a, b, c] = &self.keys;
        [a, b, if self.len == 3 { c } else { a }]
    }
}

impl RedisStore {
    /// Writes new records under `layout`'s keys (default
    /// [`KeyLayout::Compact`]); records are found under either layout, so a
    /// store may switch at any time without losing a record, and every
    /// store of this version reads what the others wrote.
    ///
    /// [`KeyLayout::Compact`] saves 32 bytes of Redis memory a record (its
    /// key, 29 characters shorter, in a smaller allocation) over
    /// [`KeyLayout::Hex`], which only a store that shares Redis with an
    /// instance of a version before compact keys needs.
    #[must_use]
    pub fn with_key_layout(mut self, layout: KeyLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The key this store writes a record under (its layout's:
    /// [`with_key_layout`](Self::with_key_layout)).
    pub fn key(&self, id: &RecordId) -> String {
        key(&self.prefix, self.layout, id)
    }

    /// A record's four keys, in the scripts' order.
    pub(crate) fn record_keys(&self, id: &RecordId) -> RecordKeys {
        record_keys(&self.prefix, self.layout, id)
    }

    /// A claim's keys, for its holder's scripts.
    pub(crate) fn holder_keys(&self, id: &RecordId) -> HolderKeys {
        let hex = hex_key(&self.prefix, id);
        match self.layout {
            KeyLayout::Hex => {
                let trace = trace_key(&hex);
                HolderKeys {
                    keys: [hex, trace, String::new()],
                    len: 2,
                }
            }
            KeyLayout::Compact => {
                let written = compact_key(&self.prefix, id);
                let trace = trace_key(&written);
                HolderKeys {
                    keys: [written, trace, hex],
                    len: 3,
                }
            }
        }
    }

    /// `<prefix>{<hex record id>}`, whatever the layout: what wake-ups name.
    pub(crate) fn hex_key(&self, id: &RecordId) -> String {
        hex_key(&self.prefix, id)
    }

    /// A key for the operation's own data that shares the record's hash
    /// slot: `<name>{<hex record id>}`. On Redis Cluster every key a
    /// [`RedisTransaction`](crate::RedisTransaction) reads or writes must
    /// carry the record's hash tag like this one. (Under either layout the
    /// record is in this key's slot.)
    pub fn tagged_key(&self, id: &RecordId, name: &str) -> String {
        let mut key = String::with_capacity(name.len() + 66);
        key.push_str(name);
        key.push('{');
        id.push_hex(&mut key);
        key.push('}');
        key
    }
}

fn record_keys(prefix: &str, layout: KeyLayout, id: &RecordId) -> RecordKeys {
    let hex = hex_key(prefix, id);
    let compact = compact_key(prefix, id);
    let (hex_trace, compact_trace) = (trace_key(&hex), trace_key(&compact));
    RecordKeys(match layout {
        KeyLayout::Hex => [hex, hex_trace, compact, compact_trace],
        KeyLayout::Compact => [compact, compact_trace, hex, hex_trace],
    })
}

/// A record's key under `layout`: `<prefix>{<hex record id>}`, or
/// `<prefix>{<slot tag>}<base64url of the id's first 24 bytes>` (192 bits
/// of the SHA-256 record id, far past any chance of two records meeting;
/// and a request under another key with the same id would still need the
/// same fingerprint to be answered).
fn key(prefix: &str, layout: KeyLayout, id: &RecordId) -> String {
    match layout {
        KeyLayout::Hex => hex_key(prefix, id),
        KeyLayout::Compact => compact_key(prefix, id),
    }
}

/// `<prefix>{<hex record id>}`.
fn hex_key(prefix: &str, id: &RecordId) -> String {
    let mut hex = String::with_capacity(prefix.len() + 66);
    hex.push_str(prefix);
    hex.push('{');
    id.push_hex(&mut hex);
    hex.push('}');
    hex
}

/// The compact key of the record `id`: in its hex key's slot.
fn compact_key(prefix: &str, id: &RecordId) -> String {
    let tag = slot::tag_of(slot::hex_slot(id.as_bytes()));
    let mut key = String::with_capacity(prefix.len() + tag.len() + 34);
    key.push_str(prefix);
    key.push('{');
    key.push_str(tag);
    key.push('}');
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(&id.as_bytes()[..24], &mut key);
    key
}

/// The key of a record's trace, in its slot: `<key>:t`.
pub(crate) fn trace_key(key: &str) -> String {
    let mut trace = String::with_capacity(key.len() + 2);
    trace.push_str(key);
    trace.push_str(":t");
    trace
}

#[cfg(test)]
mod tests {
    use idem_core::{IdempotencyKey, RecordId, Scope};

    use super::{key, record_keys, trace_key, KeyLayout};
    use crate::slot::slot;

    #[test]
    fn a_records_keys_share_one_slot_and_the_compact_one_is_29_bytes_shorter() {
        for n in 0..2000 {
            let id = RecordId::new(
                &Scope::new("account=alice"),
                &IdempotencyKey::parse(&format!("k-{n}")).expect("key"),
            );
            let keys = record_keys("idem:", KeyLayout::Compact, &id);
            let [c, ct, h, ht] = keys.all();
            assert_eq!(h, key("idem:", KeyLayout::Hex, &id));
            assert_eq!(c, key("idem:", KeyLayout::Compact, &id));
            let hex_first = record_keys("idem:", KeyLayout::Hex, &id);
            assert_eq!(hex_first.all(), [h, ht, c, ct]);
            assert_eq!((ct, ht), (&trace_key(c)[..], &trace_key(h)[..]));
            let s = slot(h.as_bytes());
            let mut balance = String::from("balance{");
            id.push_hex(&mut balance);
            balance.push('}');
            for other in [c, ct, ht, &balance[..]] {
                assert_eq!(slot(other.as_bytes()), s, "{other} in {h}'s slot");
            }
            assert!(h.len() - c.len() >= 29, "{c} against {h}");
        }
    }

    #[test]
    fn the_compact_key_is_pinned() {
        // A record written under a compact key must be found by every later
        // version: the layout does not change.
        let id = RecordId::from_bytes(std::array::from_fn(|i| u8::try_from(i).unwrap_or(0)));
        assert_eq!(
            key("idem:", KeyLayout::Compact, &id),
            "idem:{Axn}AAECAwQFBgcICQoLDA0ODxAREhMUFRYX"
        );
    }
}
