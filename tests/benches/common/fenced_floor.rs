//! The least design that fences, on Redis: a claim is `SET NX` with a
//! token from the server's clock, and a record is written only while the
//! key still holds that token. Each is a script (Redis has no
//! compare-and-set before Valkey 8.1), so this is what any design that
//! refuses a lost holder's write pays on Redis 7: two script calls a
//! request, against the least design's bare `SET NX` and `SET`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::naive::NaiveKeys;

/// `claim(lease_ms)`: the token, or nil if the key is taken.
const CLAIM: &str = r"
local t = redis.call('TIME')
local token = t[1] .. t[2]
if redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[1]) then return token end
return false
";

/// `record(token, response, ttl_ms)`: 1 recorded, 0 the claim is lost.
const RECORD: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'R' .. ARGV[2], 'PX', ARGV[3])
return 1
";

#[derive(Clone)]
pub(crate) struct FencedKeys {
    redis: redis::aio::ConnectionManager,
    prefix: String,
    claim: Arc<redis::Script>,
    record: Arc<redis::Script>,
    /// The token each claim in flight holds.
    tokens: Arc<Mutex<HashMap<String, String>>>,
}

impl FencedKeys {
    pub(crate) fn new(redis: redis::aio::ConnectionManager, prefix: String) -> Self {
        Self {
            redis,
            prefix,
            claim: Arc::new(redis::Script::new(CLAIM)),
            record: Arc::new(redis::Script::new(RECORD)),
            tokens: Arc::default(),
        }
    }
}

impl NaiveKeys for FencedKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        let token: Option<String> = self
            .claim
            .key(format!("{}{key}", self.prefix))
            .arg(60_000)
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(|e| e.to_string())?;
        let Some(token) = token else {
            return Ok(false);
        };
        self.tokens
            .lock()
            .map_err(|e| e.to_string())?
            .insert(key.to_owned(), token);
        Ok(true)
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        let token = self
            .tokens
            .lock()
            .map_err(|e| e.to_string())?
            .remove(key)
            .ok_or("no claim to record under")?;
        let recorded: i64 = self
            .record
            .key(format!("{}{key}", self.prefix))
            .arg(token)
            .arg(response)
            .arg(600_000)
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(|e| e.to_string())?;
        if recorded == 1 {
            Ok(())
        } else {
            Err("the claim was lost".to_owned())
        }
    }

    async fn recorded(&self, key: &str) -> Result<Option<bytes::Bytes>, String> {
        let value = get(&self.redis, &format!("{}{key}", self.prefix)).await?;
        Ok(value
            .and_then(|v| v.strip_prefix(b"R").map(<[u8]>::to_vec))
            .map(bytes::Bytes::from))
    }
}

/// `GET key`.
pub(crate) async fn get(
    redis: &redis::aio::ConnectionManager,
    key: &str,
) -> Result<Option<Vec<u8>>, String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut redis.clone())
        .await
        .map_err(|e| e.to_string())
}
