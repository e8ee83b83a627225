//! [`RedisLedger`](crate::redis_ledger::RedisLedger): balances in Redis, beside the records, one script call
//! a debit (and once per claim's downstream key on a Cluster).

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use idem_core::Claim;
use idem_redis::RedisStore;

use crate::ledger::{
    checked_debit, Commit, Ledger, LedgerError, LedgerTx, Respond, OPENING_BALANCE,
};

/// Balances in Redis, shared by every instance of the service, in the
/// Redis of the idempotency records: a debit is written in a
/// [`idem_redis::RedisTransaction`], applied in one script
/// call together with its record and only while its claim holds.
///
/// On Redis Cluster an account's balance and each debit's record hash to
/// different slots and cannot share a script call: there a debit carries
/// its claim's downstream key, and the ledger applies it once per key in the
/// balance's slot, so a takeover's repeat debits nothing (the second of the
/// three tools; the gRPC example's debits on a cluster are applied alone).
#[derive(Clone)]
pub struct RedisLedger {
    store: RedisStore,
    /// A connection of its own to the store's server, or none: the store's
    /// connection, which follows the primary behind Sentinel.
    connection: Option<redis::aio::ConnectionManager>,
    prefix: String,
    debit: Arc<redis::Script>,
    debit_once: Arc<redis::Script>,
}

const REDIS_DEBIT: &str = r"
local balance = tonumber(redis.call('GET', KEYS[1]) or ARGV[2])
local amount = tonumber(ARGV[1])
if balance < amount then return {0, balance} end
balance = balance - amount
redis.call('SET', KEYS[1], balance)
return {1, balance}
";

/// `debit_once(amount, opening, ttl_ms)` on the balance (`KEYS[1]`) under
/// the debit's own key (`KEYS[2]`, the claim's downstream key in the
/// balance's hash slot): the first call debits and keeps the balance after
/// under the debit's key; a repeat (a takeover's) answers that balance and
/// debits nothing.
const REDIS_DEBIT_ONCE: &str = r"
local done = redis.call('GET', KEYS[2])
if done then return {1, tonumber(done)} end
local balance = tonumber(redis.call('GET', KEYS[1]) or ARGV[2])
local amount = tonumber(ARGV[1])
if balance < amount then return {0, balance} end
balance = balance - amount
redis.call('SET', KEYS[1], balance)
redis.call('SET', KEYS[2], balance, 'PX', ARGV[3])
return {1, balance}
";

impl RedisLedger {
    /// `account`'s balance, read once.
    async fn read_balance(&self, account: &str) -> Result<u64, LedgerError> {
        let found: Option<u64> = if let Some(connection) = &self.connection {
            redis::AsyncCommands::get(&mut connection.clone(), self.key(account))
                .await
                .map_err(|e| unavailable(&e))?
        } else {
            let mut get = redis::cmd("GET");
            get.arg(self.key(account));
            self.store
                .query(&get)
                .await
                .map_err(|e| LedgerError::Unavailable(format!("redis: {e}")))?
        };
        Ok(found.unwrap_or(OPENING_BALANCE))
    }

    /// Connects to Redis at `url` (the server of `store`, the engine's
    /// store); balances live under `prefix` (`payments:balance:`, say).
    pub async fn connect(
        url: &str,
        store: &RedisStore,
        prefix: &str,
    ) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let connection = redis::aio::ConnectionManager::new(client).await?;
        Ok(Self {
            connection: Some(connection),
            ..Self::on_store(store, prefix)
        })
    }

    /// Balances under `prefix` on the server of `store`, read and written
    /// through the store's own connection ([`RedisStore::query`]): behind
    /// Sentinel the ledger follows the primary through a failover as the
    /// store does.
    pub fn on_store(store: &RedisStore, prefix: &str) -> Self {
        Self {
            store: store.clone(),
            connection: None,
            prefix: prefix.to_owned(),
            debit: Arc::new(redis::Script::new(REDIS_DEBIT)),
            debit_once: Arc::new(redis::Script::new(REDIS_DEBIT_ONCE)),
        }
    }

    /// Runs `script` on `keys` and `args`, on the ledger's connection or
    /// the store's.
    async fn run_script<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        source: &str,
        keys: &[String],
        args: &[u64],
    ) -> Result<T, LedgerError> {
        if let Some(connection) = &self.connection {
            let mut invocation = script.prepare_invoke();
            for key in keys {
                invocation.key(key);
            }
            for arg in args {
                invocation.arg(arg);
            }
            return invocation
                .invoke_async(&mut connection.clone())
                .await
                .map_err(|e| unavailable(&e));
        }
        let mut eval = redis::cmd("EVAL");
        eval.arg(source).arg(keys.len()).arg(keys).arg(args);
        self.store
            .query(&eval)
            .await
            .map_err(|e| LedgerError::Unavailable(format!("redis: {e}")))
    }

    /// An account's balance, hash-tagged by the account so that the keys of
    /// its debits share its slot on a cluster.
    fn key(&self, account: &str) -> String {
        format!("{}{{{account}}}", self.prefix)
    }

    /// Debits once per `debit` key (a claim's downstream key): a repeat
    /// answers the first debit's balance and debits nothing.
    async fn debit_once(
        &self,
        account: &str,
        amount: u64,
        debit: &idem_core::IdempotencyKey,
        ttl: Duration,
    ) -> Result<u64, LedgerError> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let keys = [
            self.key(account),
            format!("{}{{{account}}}:debit:{}", self.prefix, debit.as_str()),
        ];
        let (done, balance): (u8, u64) = self
            .run_script(
                &self.debit_once,
                REDIS_DEBIT_ONCE,
                &keys,
                &[amount, OPENING_BALANCE, ttl_ms],
            )
            .await?;
        if done == 1 {
            Ok(balance)
        } else {
            Err(LedgerError::InsufficientFunds { balance, amount })
        }
    }
}

fn unavailable(e: &redis::RedisError) -> LedgerError {
    LedgerError::Unavailable(format!("redis: {:?}", e.kind()))
}

/// A balance as Redis holds it (decimal digits), absent for a new account.
fn parse_balance(read: Option<&[u8]>) -> Result<u64, LedgerError> {
    let Some(bytes) = read else {
        return Ok(OPENING_BALANCE);
    };
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| LedgerError::Unavailable("redis: a balance that is not a number".into()))
}

#[idem_core::store::async_trait]
impl Ledger for RedisLedger {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        // A read, so asked again once when it fails: the first command on a
        // connection Redis dropped (a restart) fails while the connection
        // is made again.
        match self.read_balance(account).await {
            Err(LedgerError::Unavailable(_)) => self.read_balance(account).await,
            read => read,
        }
    }

    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError> {
        let keys = [self.key(account)];
        let (done, balance): (u8, u64) = self
            .run_script(&self.debit, REDIS_DEBIT, &keys, &[amount, OPENING_BALANCE])
            .await?;
        if done == 1 {
            Ok(balance)
        } else {
            Err(LedgerError::InsufficientFunds { balance, amount })
        }
    }

    async fn debit_and_record(
        &self,
        account: &str,
        amount: u64,
        claim: &Claim,
        respond: Respond<'_>,
    ) -> Response {
        if self.store.is_cluster() {
            // An account's balance is not in the slot of each debit's
            // record, so they cannot commit together on a cluster: the debit
            // carries the claim's downstream key instead, and the ledger
            // applies it once per key (a takeover's repeat debits nothing).
            let key = claim.downstream_key("ledger-debit");
            return respond(self.debit_once(account, amount, &key, claim.ttl()).await);
        }
        let key = self.key(account);
        loop {
            let mut tx = self.store.transaction();
            let result = match tx.get(&key).await {
                Ok(read) => parse_balance(read.as_deref()).and_then(|b| checked_debit(b, amount)),
                Err(e) => Err(LedgerError::Unavailable(format!("redis: {e}"))),
            };
            if let Ok(after) = result {
                tx.set(key.as_str(), after.to_string());
            }
            // One script call: the debit and its recorded answer, only while
            // the claim holds; another debit of the account in between: again.
            if let Ok(response) = idem_axum::try_commit_response(tx, claim, respond(result)).await {
                return response;
            }
        }
    }

    async fn debit_committed_by(
        &self,
        account: &str,
        amount: u64,
        commit: Commit<'_>,
    ) -> Result<u64, LedgerError> {
        if self.store.is_cluster() {
            return self.debit(account, amount).await;
        }
        let key = self.key(account);
        let mut tx = self.store.transaction();
        let read = tx
            .get(&key)
            .await
            .map_err(|e| LedgerError::Unavailable(format!("redis: {e}")))?;
        let after = parse_balance(read.as_deref()).and_then(|b| checked_debit(b, amount))?;
        tx.set(key, after.to_string());
        commit(LedgerTx::Redis(tx)).await?;
        Ok(after)
    }
}
