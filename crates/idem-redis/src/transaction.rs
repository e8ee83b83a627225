//! `RedisTransaction`: the operation's own writes in Redis, applied in one
//! script call together with the record's completion, only while the claim
//! holds.

use std::fmt;
use std::time::Duration;

use idem_core::store::async_trait;
use idem_core::{Lease, Outcome, RecordId, StoreError, StoreTransaction};
use redis::Value;

use crate::wire::{ms, Connection, TokenText};
use crate::RedisStore;

/// One staged write.
enum Write {
    Set(Vec<u8>),
    Delete,
}

/// The record a transaction completes.
struct RecordWrite {
    id: RecordId,
    lease: Lease,
    outcome: Outcome,
    ttl: Duration,
}

/// The operation's writes to its own data in the store's Redis, applied by
/// [`Claim::commit`](idem_core::Claim::commit) in **one script call** together with the record's
/// completion ([`RedisStore::transaction`]).
///
/// It is optimistic, as `WATCH` is, but in one round trip and on a
/// multiplexed connection: [`get`](Self::get) reads a key now and remembers
/// what it read; [`set`](Self::set) and [`delete`](Self::delete) stage
/// writes. The commit script then checks, atomically, that the claim still
/// holds (else nothing is applied: `CommitError::LeaseLost`) and that every
/// key read still has the value read (else nothing is applied:
/// `CommitError::Conflict`, read again and recompute), applies the writes,
/// and completes the record. A holder that stalled past its lease, or whose
/// record was force-removed, finds its claim lost at the commit, and its
/// writes never land. A commit whose answer was lost can be sent again: the
/// script answers that this claim committed already and applies nothing
/// twice.
///
/// Reads see Redis as it is, not the transaction's own staged writes. Values
/// are bytes; the keys are not prefixed. On Redis Cluster every key must
/// carry the record's hash tag ([`RedisStore::tagged_key`]), or the commit
/// is refused with an error that names the key; on one server any key will
/// do.
///
/// ```no_run
/// use idem_core::{encode_result, Claim, Never};
/// use idem_redis::RedisStore;
///
/// async fn debit(store: &RedisStore, claim: &Claim, amount: u64) -> Result<u64, Box<dyn std::error::Error>> {
///     loop {
///         let mut tx = store.transaction();
///         let balance: u64 = match tx.get("balance:alice").await? {
///             Some(bytes) => std::str::from_utf8(&bytes)?.parse()?,
///             None => 10_000,
///         };
///         let after = balance.checked_sub(amount).ok_or("insufficient funds")?;
///         tx.set("balance:alice", after.to_string());
///         let outcome = encode_result(&Ok::<_, Never>(after))?;
///         match claim.commit(tx, &outcome).await {
///             Ok(()) => return Ok(after),
///             Err(e) if e.is_conflict() => continue, // someone else debited: read again
///             Err(e) => return Err(e.into()),
///         }
///     }
/// }
/// ```
pub struct RedisTransaction {
    store: RedisStore,
    reads: Vec<(String, Option<Vec<u8>>)>,
    writes: Vec<(String, Write)>,
    completion: Option<RecordWrite>,
}

impl fmt::Debug for RedisTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTransaction")
            .field("reads", &self.reads.len())
            .field("writes", &self.writes.len())
            .field("completes", &self.completion.is_some())
            .finish_non_exhaustive()
    }
}

impl RedisTransaction {
    pub(crate) fn new(store: RedisStore) -> Self {
        Self {
            store,
            reads: Vec::new(),
            writes: Vec::new(),
            completion: None,
        }
    }

    /// Reads `key` (a string value) now, and has the commit check that it
    /// still holds what was read. A key read twice is checked against the
    /// first read.
    pub async fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut get = redis::Cmd::new();
        get.arg("GET").arg(key);
        let mut connection = self.store.connection.clone();
        let read = tokio::time::timeout(self.store.timeout, connection.query(&get)).await;
        let value = match read {
            Ok(Ok(Value::Nil)) => None,
            Ok(Ok(Value::BulkString(bytes))) => Some(bytes),
            Ok(Ok(other)) => {
                return Err(StoreError::corrupt(format!(
                    "redis transaction: GET {key} answered {other:?}"
                )))
            }
            Ok(Err(e)) => {
                return Err(StoreError::unavailable(
                    format!("redis transaction: GET {key} failed"),
                    e,
                ))
            }
            Err(elapsed) => {
                return Err(StoreError::unavailable(
                    format!(
                        "redis transaction: GET {key} did not answer within {:?}",
                        self.store.timeout
                    ),
                    elapsed,
                ))
            }
        };
        if !self.reads.iter().any(|(k, _)| k == key) {
            self.reads.push((key.to_owned(), value.clone()));
        }
        Ok(value)
    }

    /// Stages `SET key value`, applied at the commit.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.writes.push((key.into(), Write::Set(value.into())));
    }

    /// Stages `DEL key`, applied at the commit.
    pub fn delete(&mut self, key: impl Into<String>) {
        self.writes.push((key.into(), Write::Delete));
    }

    /// On Redis Cluster, every key must carry the record's hash tag.
    fn check_slots(&self, id: &RecordId) -> Result<(), StoreError> {
        if !matches!(self.store.connection, Connection::Cluster(_)) {
            return Ok(());
        }
        let tag = id.to_hex();
        let keys = self
            .reads
            .iter()
            .map(|(k, _)| k)
            .chain(self.writes.iter().map(|(k, _)| k));
        for key in keys {
            if hash_tag(key) != Some(tag.as_str()) {
                return Err(StoreError::unsupported_because(format!(
                    "on Redis Cluster a transaction's keys must share its record's hash slot, and \
                     `{key}` does not carry the record's hash tag `{{{tag}}}`: name it with \
                     `RedisStore::tagged_key(claim.record_id(), ...)`"
                )));
            }
        }
        Ok(())
    }
}

/// The part of `key` Redis Cluster hashes: between the first `{` and the
/// next `}`, if that is not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

#[async_trait]
impl StoreTransaction for RedisTransaction {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.completion = Some(RecordWrite {
            id: *id,
            lease: *lease,
            outcome: outcome.clone(),
            ttl,
        });
        Ok(())
    }

    async fn commit(self) -> Result<(), StoreError> {
        let Some(completion) = &self.completion else {
            return Err(StoreError::unsupported_because(
                "a Redis transaction commits with a record: hand it to `Claim::commit`",
            ));
        };
        self.check_slots(&completion.id)?;
        let store = &self.store;
        let script = &store.scripts.commit;
        let numkeys = 3 + self.reads.len() + self.writes.len();
        let mut eval = redis::Cmd::new();
        eval.arg("EVALSHA").arg(script.get_hash()).arg(numkeys);
        // First the claim's three keys (key_layout.rs), then the keys read
        // and written.
        for key in store.holder_keys(&completion.id).three() {
            eval.arg(key);
        }
        for (key, _) in &self.reads {
            eval.arg(key);
        }
        for (key, _) in &self.writes {
            eval.arg(key);
        }
        let token = TokenText::new(completion.lease.token);
        eval.arg(token.as_bytes())
            .arg(ms(completion.ttl, &mut itoa::Buffer::new()))
            .arg(completion.outcome.as_bytes())
            .arg(store.channel.as_bytes())
            .arg(self.reads.len());
        let mut tagged = Vec::new();
        for (_, read) in &self.reads {
            tagged.clear();
            match read {
                None => tagged.push(b'-'),
                Some(bytes) => {
                    tagged.push(b'=');
                    tagged.extend_from_slice(bytes);
                }
            }
            eval.arg(&tagged[..]);
        }
        for (_, write) in &self.writes {
            tagged.clear();
            match write {
                Write::Set(bytes) => {
                    tagged.push(b'S');
                    tagged.extend_from_slice(bytes);
                }
                Write::Delete => tagged.push(b'D'),
            }
            eval.arg(&tagged[..]);
        }
        eval.arg(store.trace_ms().as_bytes());
        match store.eval("commit", script, &eval).await? {
            Value::Int(1 | 2) => Ok(()),
            Value::Int(0) => Err(StoreError::lease_lost()),
            Value::Array(items) => match items.as_slice() {
                [Value::Int(3), Value::Int(i)] => {
                    let key = usize::try_from(*i - 1)
                        .ok()
                        .and_then(|i| self.reads.get(i))
                        .map_or("a key", |(k, _)| k.as_str());
                    Err(StoreError::conflict(format!("redis key `{key}`")))
                }
                _ => Err(StoreError::corrupt(format!(
                    "redis commit: unexpected reply {items:?}"
                ))),
            },
            other => Err(StoreError::corrupt(format!(
                "redis commit: unexpected reply {other:?}"
            ))),
        }
    }

    async fn rollback(self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::hash_tag;

    #[test]
    fn hash_tags_follow_redis_cluster_rules() {
        assert_eq!(hash_tag("balance{abc}"), Some("abc"));
        assert_eq!(hash_tag("{abc}x{def}"), Some("abc"));
        assert_eq!(hash_tag("balance:alice"), None);
        assert_eq!(hash_tag("a{}b{c}"), None);
        assert_eq!(hash_tag("a{b"), None);
    }
}
