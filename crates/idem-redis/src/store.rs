//! The [`Store`] on Redis: `begin` (from the replay cache, or a script
//! call; on a full server, the peek that still answers recorded work),
//! and the other transitions, each one script call.

use std::time::{Duration, Instant};

use idem_core::store::{async_trait, Begin, StoreFuture};
use idem_core::waiters::Look;
use idem_core::{
    Fingerprint, Lease, Outcome, RecordId, RecordInfo, RecordInfoState, Removal, Store, StoreError,
    StoreErrorKind,
};
use redis::Value;

use crate::batch::Lane;
use crate::eviction;
use crate::operations::{self, parse_token};
use crate::redis_store::fenced_reply;
use crate::scripts::evalsha;
use crate::wire::{ms, TokenText};
use crate::RedisStore;

impl RedisStore {
    /// The answer to `begin` from the replay cache, if it has one.
    fn begin_cached(&self, id: &RecordId, fingerprint: &Fingerprint) -> Option<Begin> {
        let cache = self.replay_cache()?;
        if let Some(wakes) = &self.wakes {
            // The cache is used only while the wake channel is subscribed.
            wakes.start(&self.channel);
        }
        cache.answer(id, fingerprint)
    }

    /// `begin`, asked of Redis (the cache had no answer).
    async fn begin_in_redis(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        let cache = self.replay_cache();
        let ticket = cache.and_then(|c| Some((c, c.ticket(id)?)));
        // With a cache, a replay also answers its key's time to live.
        let want_ttl: &[u8] = if ticket.is_some() { b"1" } else { b"" };
        // On a cluster the durable mode's answers from an existing record
        // are writes of this connection, so that the WAIT after it covers
        // them (elsewhere the round's own write does; see replication.rs).
        let durable: &[u8] = if self.replication.is_some() && self.is_cluster() {
            b"1"
        } else {
            b""
        };
        let keys = self.record_keys(id);
        let mut lease_ms = itoa::Buffer::new();
        let args = [
            fingerprint.as_bytes(),
            ms(lease, &mut lease_ms),
            want_ttl,
            durable,
        ];
        self.eviction.check_if_due(&self.connection).await;
        let sent = Instant::now();
        let claimed = if self.batches() {
            let args = args.iter().map(|a| a.to_vec()).collect();
            let keys = keys.all().map(str::to_owned).to_vec();
            self.batched(Lane::Begin, keys, args)
                .await
                .map(|reply| (reply, Ok(())))
        } else {
            let eval = evalsha(&self.scripts.begin, &keys.all(), &args);
            self.eval_replicated("begin", &self.scripts.begin, &eval)
                .await
        };
        let (reply, replicated) = match claimed {
            // A full server refuses the claim; it may still answer a retry
            // of what it recorded.
            Err(full) if full.kind() == StoreErrorKind::Full => {
                let peek = evalsha(
                    &self.scripts.peek,
                    &keys.all(),
                    &[fingerprint.as_bytes(), durable],
                );
                match self
                    .eval_replicated("begin", &self.scripts.peek, &peek)
                    .await?
                {
                    (Value::Int(0), _) => return Err(full),
                    answer => answer,
                }
            }
            answer => answer?,
        };
        if let Err(not_replicated) = replicated {
            // Not acted on. A claim is released at once: nothing ran under it.
            if let Value::BulkString(token) = &reply {
                let lease = Lease {
                    token: parse_token(token)?,
                    duration: lease,
                };
                let _ = self.release(id, &lease).await;
            }
            return Err(not_replicated);
        }
        let unexpected = || StoreError::corrupt(format!("redis begin: unexpected reply {reply:?}"));
        let items = match &reply {
            Value::BulkString(token) => {
                let lease = Lease {
                    token: parse_token(token)?,
                    duration: lease,
                };
                if let Some(policy) = self.eviction.refusing() {
                    // The policy changed since the store connected: no new
                    // work on a server that may forget its record.
                    let _ = self.release(id, &lease).await;
                    return Err(StoreError::unavailable_because(eviction::refusal(&policy)));
                }
                return Ok(Begin::Acquired(lease));
            }
            Value::Array(items) => items,
            _ => return Err(unexpected()),
        };
        match (items.first(), items.get(1)) {
            (Some(Value::BulkString(tag)), Some(Value::Int(left))) if tag == b"I" => {
                // PTTL: milliseconds left of the lease (negative if the
                // key has no expiry, which a lease always has).
                let left = u64::try_from(*left).map_err(|_| unexpected())?;
                Ok(Begin::InFlight {
                    retry_after: Duration::from_millis(left),
                })
            }
            (Some(Value::BulkString(tag)), Some(Value::BulkString(bytes))) if tag == b"R" => {
                let outcome = Outcome::new(bytes.clone());
                if let (Some((cache, ticket)), Some(Value::Int(left))) = (ticket, items.get(2)) {
                    // The key lives at least `left` ms after the call was sent.
                    if let Ok(left) = u64::try_from(*left) {
                        let expires = sent + Duration::from_millis(left);
                        cache.fill(id, ticket, fingerprint, &outcome, expires);
                    }
                }
                Ok(Begin::Replay(outcome))
            }
            (Some(Value::BulkString(tag)), None) if tag == b"M" => Ok(Begin::Mismatch),
            (Some(Value::BulkString(tag)), None) if tag == b"E" => Ok(Begin::Expired),
            _ => Err(unexpected()),
        }
    }

    /// `complete`'s script.
    async fn complete_in_redis(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let token = TokenText::new(lease.token);
        let (mut ttl_ms, trace) = (itoa::Buffer::new(), self.trace_ms());
        let args = [
            token.as_bytes(),
            ms(ttl, &mut ttl_ms),
            outcome.as_bytes(),
            self.channel.as_bytes(),
            trace.as_bytes(),
        ];
        let keys = self.holder_keys(id);
        let reply = if self.batches() {
            // Three keys an item, whatever the layout (the hex key last).
            let args = args.iter().map(|a| a.to_vec()).collect();
            let keys = keys.three().map(str::to_owned).to_vec();
            self.batched(Lane::Complete, keys, args).await?
        } else {
            let script = &self.scripts.complete;
            let eval = evalsha(script, &keys.all(), &args);
            self.eval("complete", script, &eval).await?
        };
        fenced_reply("complete", reply)
    }
}

#[async_trait]
impl Store for RedisStore {
    // A replay from the cache is answered at once, allocating nothing; a
    // call to Redis boxes its work once.
    fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin> {
        if let Some(answer) = self.begin_cached(id, fingerprint) {
            return StoreFuture::ready(Ok(answer));
        }
        let (store, id, fingerprint) = (self.clone(), *id, *fingerprint);
        StoreFuture::boxed(async move { store.begin_in_redis(&id, &fingerprint, lease).await })
    }

    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        let (store, id, lease, outcome) = (self.clone(), *id, *lease, outcome.clone());
        StoreFuture::boxed(async move { store.complete_in_redis(&id, &lease, &outcome, ttl).await })
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        let token = TokenText::new(lease.token);
        self.fenced(
            "release",
            &self.scripts.release,
            &self.holder_keys(id).all(),
            &[token.as_bytes(), self.channel.as_bytes()],
        )
        .await
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        let token = TokenText::new(lease.token);
        self.fenced(
            "renew",
            &self.scripts.renew,
            &self.holder_keys(id).all(),
            &[token.as_bytes(), ms(duration, &mut itoa::Buffer::new())],
        )
        .await?;
        Ok(Lease {
            token: lease.token,
            duration,
        })
    }

    fn name(&self) -> &'static str {
        "redis"
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        let reply = self
            .invoke(
                "inspect",
                &self.scripts.inspect,
                &self.record_keys(id).all(),
                &[],
            )
            .await?;
        operations::inspected(&reply)
    }

    fn wakes(&self) -> bool {
        self.wakes.is_some()
    }

    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        let Some(wakes) = &self.wakes else {
            tokio::time::sleep(within).await;
            return None;
        };
        wakes.start(&self.channel);
        let look = async {
            match self.inspect(id).await {
                Ok(Some(RecordInfo {
                    state: RecordInfoState::InFlight { .. },
                    ..
                })) => Look::InFlight,
                // The durable mode answers a completed record only through
                // `begin`, whose WAIT covers it: an inspection waits for no
                // replica, and the record may not have reached one.
                Ok(Some(RecordInfo {
                    state: RecordInfoState::Completed { .. },
                    ..
                })) if self.replication.is_some() => Look::Changed(None),
                Ok(read) => Look::Changed(read),
                Err(_) => Look::Changed(None),
            }
        };
        // Wake-ups name the hex key, whatever the layout.
        wakes.waiters.wait(self.hex_key(id), within, look).await
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        let force: &[u8] = if force { b"1" } else { b"0" };
        let reply = self
            .invoke(
                "remove",
                &self.scripts.remove,
                &self.record_keys(id).all(),
                &[force, self.channel.as_bytes()],
            )
            .await?;
        let removal = operations::removed(&reply)?;
        if let (Removal::Removed, Some(cache)) = (&removal, self.replay_cache()) {
            cache.changed(id);
        }
        Ok(removal)
    }
}
