//! Whether the server may evict idem's records, and how many keys it has
//! evicted. A record evicted before its TTL is a promise broken in silence:
//! the retry it was kept for runs its operation again. Every policy but
//! `noeviction` can do that to idem's records (the `volatile-*` policies
//! too, since every record carries an expiry), so the store reads the
//! policy from `INFO memory` (which managed services answer where `CONFIG`
//! is disabled) when it connects and every [`CHECK_EVERY`] after, at once
//! after a failed call (a reconnection, a failover): with such a policy it
//! takes no new claim unless the user accepted eviction
//! ([`Connector::accept_eviction`](crate::Connector::accept_eviction)).
//! Evicted keys the server reports (`INFO stats`) are counted, logged and,
//! with the `metrics` feature, published as `idem.redis.evicted_keys`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::Value;

use crate::wire::Connection;

/// How often the policy and the eviction count are read again.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(5);

/// What the store knows of the server's eviction.
pub(crate) struct Eviction {
    /// The user accepted a policy that evicts.
    accepted: bool,
    /// The evicting policy seen at the last check, if not accepted: new
    /// claims are refused while it is set.
    refusing: Mutex<Option<String>>,
    /// Whether `refusing` is set: what every claim reads, without a lock.
    refuses: AtomicBool,
    /// When the next check is due, in milliseconds after `since` (0: now).
    due_ms: AtomicU64,
    since: Instant,
    checking: AtomicBool,
    /// The server's `evicted_keys` at the last check (`u64::MAX`: none yet).
    evicted_before: AtomicU64,
    /// Keys the server evicted since the store first looked.
    seen: AtomicU64,
}

/// What one `INFO memory stats` said, summed over a cluster's nodes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The first policy that can evict records, if a node has one.
    pub(crate) evicting: Option<String>,
    /// Keys evicted since each node started.
    pub(crate) evicted_keys: u64,
}

impl Eviction {
    pub(crate) fn new(accepted: bool) -> Self {
        Self {
            accepted,
            refusing: Mutex::new(None),
            refuses: AtomicBool::new(false),
            due_ms: AtomicU64::new(0),
            since: Instant::now(),
            checking: AtomicBool::new(false),
            evicted_before: AtomicU64::new(u64::MAX),
            seen: AtomicU64::new(0),
        }
    }

    /// The evicting policy new claims are refused for, if any.
    pub(crate) fn refusing(&self) -> Option<String> {
        if !self.refuses.load(Ordering::Acquire) {
            return None;
        }
        self.refusing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Keys the server reported evicted since the store first looked.
    pub(crate) fn seen(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    /// A call failed: the next one checks again (it may be on a new
    /// connection or a new primary).
    pub(crate) fn check_soon(&self) {
        self.due_ms.store(0, Ordering::Release);
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Checks if a check is due and none is under way; a check that cannot
    /// read the server changes nothing (the call that follows fails on its
    /// own if the server is gone).
    pub(crate) async fn check_if_due(&self, connection: &Connection) {
        let now = self.now_ms();
        let due = self.due_ms.load(Ordering::Acquire);
        if now < due {
            return;
        }
        let next = now.saturating_add(u64::try_from(CHECK_EVERY.as_millis()).unwrap_or(u64::MAX));
        if self
            .due_ms
            .compare_exchange(due, next, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
            || self.checking.swap(true, Ordering::AcqRel)
        {
            return;
        }
        // Reset even if this future is dropped mid-check (its caller went
        // away): else no check would ever run again.
        let _checking = Checking(&self.checking);
        let _ = self.check(connection).await;
    }

    /// Reads the server's policy and eviction count now.
    pub(crate) async fn check(&self, connection: &Connection) -> redis::RedisResult<Reading> {
        let mut connection = connection.clone();
        let info = connection
            .query(redis::cmd("INFO").arg("memory").arg("stats"))
            .await?;
        let reading = read(&info);
        self.note(&reading);
        Ok(reading)
    }

    fn note(&self, reading: &Reading) {
        let refusing = reading.evicting.clone().filter(|_| !self.accepted);
        if let Some(policy) = &refusing {
            tracing::error!(target: "idem", policy = %policy, "{}", refusal(policy));
        }
        let refuses = refusing.is_some();
        *self.refusing.lock().unwrap_or_else(PoisonError::into_inner) = refusing;
        self.refuses.store(refuses, Ordering::Release);
        let before = self
            .evicted_before
            .swap(reading.evicted_keys, Ordering::AcqRel);
        // A restarted server or a new primary counts from its own start.
        if before != u64::MAX && reading.evicted_keys > before {
            let evicted = reading.evicted_keys - before;
            self.seen.fetch_add(evicted, Ordering::Relaxed);
            tracing::warn!(target: "idem", evicted, policy = reading.evicting.as_deref().unwrap_or("noeviction"), "the Redis server evicted keys: idem's records among them are forgotten before their TTL, and their retries run again");
            #[cfg(feature = "metrics")]
            metrics::counter!("idem.redis.evicted_keys").increment(evicted);
        }
    }
}

/// Marks a check under way; clears the mark when dropped.
struct Checking<'a>(&'a AtomicBool);

impl Drop for Checking<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Why a policy is refused, and what to do.
pub(crate) fn refusal(policy: &str) -> String {
    format!(
        "the Redis server's maxmemory-policy is `{policy}`: when full it evicts keys before \
         their TTL, idem's records among them, and a retry of an evicted record runs its \
         operation again. Set `maxmemory-policy noeviction` (a full server then refuses new \
         work and still answers retries), or accept the risk with \
         `RedisStore::connector().accept_eviction()`"
    )
}

/// Whether `policy` can evict idem's records: all but `noeviction` (the
/// `volatile-*` policies evict keys with an expiry, and every record has one).
pub(crate) fn evicts(policy: &str) -> bool {
    policy != "noeviction"
}

/// The policy and eviction count in an `INFO` reply: one text, or a map of
/// one text per node (a cluster).
pub(crate) fn read(info: &Value) -> Reading {
    let mut reading = Reading::default();
    let mut texts = Vec::new();
    collect_texts(info, &mut texts);
    for text in texts {
        for line in text.lines() {
            let line = line.trim_end();
            if let Some(policy) = line.strip_prefix("maxmemory_policy:") {
                if evicts(policy) && reading.evicting.is_none() {
                    reading.evicting = Some(policy.to_owned());
                }
            } else if let Some(count) = line.strip_prefix("evicted_keys:") {
                reading.evicted_keys += count.parse::<u64>().unwrap_or(0);
            }
        }
    }
    reading
}

fn collect_texts<'a>(value: &'a Value, into: &mut Vec<&'a str>) {
    match value {
        Value::BulkString(bytes) => into.extend(std::str::from_utf8(bytes).ok()),
        Value::VerbatimString { text, .. } | Value::SimpleString(text) => into.push(text),
        Value::Map(pairs) => pairs.iter().for_each(|(_, v)| collect_texts(v, into)),
        Value::Array(items) => items.iter().for_each(|v| collect_texts(v, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(policy: &str, evicted: u64) -> Value {
        Value::BulkString(
            format!(
                "# Memory\r\nused_memory:1000\r\nmaxmemory_policy:{policy}\r\n\r\n# Stats\r\nevicted_keys:{evicted}\r\n"
            )
            .into_bytes(),
        )
    }

    #[test]
    fn only_noeviction_keeps_every_record() {
        for policy in [
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            assert_eq!(
                read(&info(policy, 3)),
                Reading {
                    evicting: Some(policy.to_owned()),
                    evicted_keys: 3
                }
            );
        }
        assert_eq!(read(&info("noeviction", 0)), Reading::default());
    }

    #[test]
    fn a_cluster_is_refused_if_any_node_evicts_and_its_evictions_are_summed() {
        let nodes = Value::Map(vec![
            (
                Value::BulkString(b"127.0.0.1:7301".to_vec()),
                info("noeviction", 2),
            ),
            (
                Value::BulkString(b"127.0.0.1:7302".to_vec()),
                info("volatile-ttl", 5),
            ),
        ]);
        assert_eq!(
            read(&nodes),
            Reading {
                evicting: Some("volatile-ttl".to_owned()),
                evicted_keys: 7
            }
        );
    }

    #[test]
    fn evictions_are_counted_from_the_first_look_and_a_restart_counts_anew() {
        let eviction = Eviction::new(true);
        let at = |evicted_keys| Reading {
            evicting: Some("allkeys-lru".to_owned()),
            evicted_keys,
        };
        eviction.note(&at(100));
        assert_eq!(
            eviction.seen(),
            0,
            "what was evicted before the store looked"
        );
        eviction.note(&at(130));
        assert_eq!(eviction.seen(), 30);
        eviction.note(&at(4));
        eviction.note(&at(10));
        assert_eq!(eviction.seen(), 36);
        assert_eq!(eviction.refusing(), None, "accepted");
    }
}
