//! The payments service: accounts with balances, and idempotent debits.
//!
//! `GET /accounts/{id}` answers the balance (an account is opened with 10000
//! on first use); `POST /accounts/{id}/debits` with an `Idempotency-Key` and
//! `{"amount": N}` debits it once per key, whatever the client retries.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, FromRef, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::{
    Claim, Engine, Lease, MemoryStore, MemoryTransaction, Outcome, RecordId, StoreError,
    StoreTransaction,
};
use idem_mysql::MySqlTransaction;
use idem_postgres::{PgStore, PgTransaction};
use idem_redis::{RedisStore, RedisTransaction};
use idem_sqlite::SqliteTransaction;

use crate::provider::ProviderClient;
use serde::{Deserialize, Serialize};
use sqlx::AssertSqlSafe;

/// The balance of a new account.
pub const OPENING_BALANCE: u64 = 10_000;

/// The largest amount a debit may ask for: balances are 64-bit signed
/// integers in PostgreSQL.
pub const MAX_AMOUNT: u64 = i64::MAX as u64;

/// The largest request body the service reads (the README's 1 MiB); a larger
/// one is refused with 413 before any handler runs.
pub const MAX_BODY: usize = 1 << 20;

/// Turns a debit's result into the HTTP answer.
pub type Respond<'a> = &'a (dyn Fn(Result<u64, LedgerError>) -> Response + Send + Sync);

/// Commits a debit's open transaction, after recording in it the answer
/// the debit gets (`idem_tonic::commit_with_record`, say).
pub type Commit<'a> = &'a (dyn Fn(LedgerTx) -> Pin<Box<dyn Future<Output = Result<(), LedgerError>> + Send>>
         + Send
         + Sync);

/// A debit's open transaction, in the store where the ledger keeps its
/// balances beside the idempotency records: it commits with the record,
/// only while the claim holds.
pub enum LedgerTx {
    /// Balances in this process ([`MemoryLedger`]).
    Memory(MemoryTransaction),
    /// Balances in Redis ([`RedisLedger`]).
    Redis(RedisTransaction),
    /// Balances in PostgreSQL ([`PgLedger`]).
    Postgres(PgTransaction),
    /// Balances in MariaDB or MySQL ([`MySqlLedger`](crate::mysql_ledger::MySqlLedger)).
    MySql(MySqlTransaction),
    /// Balances in SQLite ([`SqliteLedger`](crate::sqlite_ledger::SqliteLedger)).
    Sqlite(SqliteTransaction),
}

impl LedgerTx {
    /// Commits the debit without a record (a debit outside idem). A Redis
    /// transaction commits with a record only.
    pub async fn commit_alone(self) -> Result<(), LedgerError> {
        StoreTransaction::commit(self)
            .await
            .map_err(|e| LedgerError::Unavailable(e.to_string()))
    }
}

#[idem_core::async_trait]
impl StoreTransaction for LedgerTx {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        match self {
            Self::Memory(tx) => tx.complete(id, lease, outcome, ttl).await,
            Self::Redis(tx) => tx.complete(id, lease, outcome, ttl).await,
            Self::Postgres(tx) => tx.complete(id, lease, outcome, ttl).await,
            Self::MySql(tx) => tx.complete(id, lease, outcome, ttl).await,
            Self::Sqlite(tx) => tx.complete(id, lease, outcome, ttl).await,
        }
    }

    async fn commit(self) -> Result<(), StoreError> {
        match self {
            Self::Memory(tx) => StoreTransaction::commit(tx).await,
            Self::Redis(tx) => StoreTransaction::commit(tx).await,
            Self::Postgres(tx) => StoreTransaction::commit(tx).await,
            Self::MySql(tx) => StoreTransaction::commit(tx).await,
            Self::Sqlite(tx) => StoreTransaction::commit(tx).await,
        }
    }

    async fn rollback(self) -> Result<(), StoreError> {
        match self {
            Self::Memory(tx) => StoreTransaction::rollback(tx).await,
            Self::Redis(tx) => StoreTransaction::rollback(tx).await,
            Self::Postgres(tx) => StoreTransaction::rollback(tx).await,
            Self::MySql(tx) => StoreTransaction::rollback(tx).await,
            Self::Sqlite(tx) => StoreTransaction::rollback(tx).await,
        }
    }
}

/// Where balances live.
#[idem_core::async_trait]
pub trait Ledger: Send + Sync + 'static {
    /// The balance of `account`, opening it if new.
    async fn balance(&self, account: &str) -> Result<u64, LedgerError>;
    /// Debits `amount`, returning the balance after.
    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError>;
    /// Debits and answers. A transactional ledger (PostgreSQL) overrides this
    /// to complete the idempotency record in the debit's own transaction;
    /// the others leave the record to the engine.
    async fn debit_and_record(
        &self,
        account: &str,
        amount: u64,
        _claim: &Claim,
        respond: Respond<'_>,
    ) -> Response {
        respond(self.debit(account, amount).await)
    }
    /// Debits by handing the debit's open transaction to `commit` (which
    /// records the answer in it and commits), so that the debit and its
    /// recorded answer commit together. The default debits alone.
    async fn debit_committed_by(
        &self,
        account: &str,
        amount: u64,
        _commit: Commit<'_>,
    ) -> Result<u64, LedgerError> {
        self.debit(account, amount).await
    }
}

/// Why a ledger operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The balance is lower than the amount.
    #[error("insufficient funds: balance {balance}, debit {amount}")]
    InsufficientFunds {
        /// The balance.
        balance: u64,
        /// The amount asked for.
        amount: u64,
    },
    /// The ledger's storage failed.
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
}

/// Balances in this process's memory, next to the idempotency records of
/// the same [`MemoryStore`]: a debit is applied in a
/// [`idem_core::MemoryTransaction`], together with its
/// record and only while its claim holds.
pub struct MemoryLedger {
    store: MemoryStore,
    balances: Arc<Mutex<HashMap<String, u64>>>,
}

impl MemoryLedger {
    /// A ledger whose debits commit with their records in `store` (the
    /// engine's store).
    pub fn new(store: &MemoryStore) -> Self {
        Self {
            store: store.clone(),
            balances: Arc::default(),
        }
    }

    fn read(&self, account: &str) -> u64 {
        let balances = self.balances.lock().unwrap_or_else(PoisonError::into_inner);
        balances.get(account).copied().unwrap_or(OPENING_BALANCE)
    }

    /// A transaction whose effect, under the balances' lock, checks that
    /// the account still holds `seen` and, if the debit goes through, sets
    /// it to the balance after.
    fn staged(
        &self,
        account: &str,
        seen: u64,
        result: &Result<u64, LedgerError>,
    ) -> MemoryTransaction {
        let mut tx = self.store.transaction();
        let (balances, id, after) = (
            Arc::clone(&self.balances),
            account.to_owned(),
            result.as_ref().ok().copied(),
        );
        tx.apply("the account's balance", move || {
            let mut balances = balances.lock().unwrap_or_else(PoisonError::into_inner);
            if balances.get(&id).copied().unwrap_or(OPENING_BALANCE) != seen {
                return false;
            }
            if let Some(after) = after {
                balances.insert(id, after);
            }
            true
        });
        tx
    }
}

#[idem_core::async_trait]
impl Ledger for MemoryLedger {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        Ok(self.read(account))
    }

    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError> {
        let mut balances = self.balances.lock().unwrap_or_else(PoisonError::into_inner);
        let balance = balances
            .entry(account.to_owned())
            .or_insert(OPENING_BALANCE);
        if *balance < amount {
            return Err(LedgerError::InsufficientFunds {
                balance: *balance,
                amount,
            });
        }
        *balance -= amount;
        Ok(*balance)
    }

    async fn debit_and_record(
        &self,
        account: &str,
        amount: u64,
        claim: &Claim,
        respond: Respond<'_>,
    ) -> Response {
        loop {
            let seen = self.read(account);
            let result = checked_debit(seen, amount);
            let tx = self.staged(account, seen, &result);
            // The debit lands with its recorded answer, and only while the
            // claim holds; another debit of the account in between: again.
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
        let seen = self.read(account);
        let result = checked_debit(seen, amount);
        let tx = self.staged(account, seen, &result);
        let after = result?;
        commit(LedgerTx::Memory(tx)).await?;
        Ok(after)
    }
}

/// The balance after debiting `amount` from `balance`, or why not.
fn checked_debit(balance: u64, amount: u64) -> Result<u64, LedgerError> {
    balance
        .checked_sub(amount)
        .ok_or(LedgerError::InsufficientFunds { balance, amount })
}

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

#[idem_core::async_trait]
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

/// Balances in PostgreSQL, beside the idempotency records: each debit
/// commits together with its record, or not at all.
#[derive(Clone)]
pub struct PgLedger {
    store: PgStore,
    sql: Arc<LedgerSql>,
    /// Named statements kept per connection, unless the store goes through
    /// a transaction pooler.
    persistent: bool,
}

/// The ledger's statements, rendered once for the store's schema.
struct LedgerSql {
    create: Arc<str>,
    open: Arc<str>,
    debit: Arc<str>,
    balance: Arc<str>,
}

impl PgLedger {
    /// A ledger in the store's schema (table `accounts`).
    pub fn new(store: PgStore) -> Self {
        let t = format!("\"{}\".accounts", store.schema());
        let sql = LedgerSql {
            create: format!(
                "CREATE TABLE IF NOT EXISTS {t} (id text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))"
            )
            .into(),
            open: format!("INSERT INTO {t} (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING").into(),
            debit: format!("UPDATE {t} SET balance = balance - $2 WHERE id = $1 AND balance >= $2 RETURNING balance")
                .into(),
            balance: format!("SELECT balance FROM {t} WHERE id = $1").into(),
        };
        Self {
            persistent: !store.is_behind_transaction_pooler(),
            store,
            sql: Arc::new(sql),
        }
    }

    /// Creates the accounts table if it does not exist. Safe when many
    /// instances start at once: they take turns on a transaction-scoped
    /// advisory lock (`CREATE TABLE IF NOT EXISTS` alone races on the
    /// catalog and fails one of two concurrent creators).
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        let mut tx = self.store.pool().begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(7300861234500002)")
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        sqlx::query(AssertSqlSafe(Arc::clone(&self.sql.create)))
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn debit_in(
        &self,
        tx: &mut sqlx::PgConnection,
        account: &str,
        amount: u64,
    ) -> Result<u64, LedgerError> {
        let db = |e: sqlx::Error| LedgerError::Unavailable(format!("postgres: {e}"));
        // `apply_debit` refuses amounts over `MAX_AMOUNT` before this.
        let amount = i64::try_from(amount).map_err(|_| {
            LedgerError::Unavailable(format!("amount {amount} is over the ledger's range"))
        })?;
        sqlx::query(AssertSqlSafe(Arc::clone(&self.sql.open)))
            .persistent(self.persistent)
            .bind(account)
            .bind(i64::try_from(OPENING_BALANCE).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let after: Option<i64> = sqlx::query_scalar(AssertSqlSafe(Arc::clone(&self.sql.debit)))
            .persistent(self.persistent)
            .bind(account)
            .bind(amount)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if let Some(after) = after {
            return Ok(u64::try_from(after).unwrap_or(0));
        }
        let balance: i64 = sqlx::query_scalar(AssertSqlSafe(Arc::clone(&self.sql.balance)))
            .persistent(self.persistent)
            .bind(account)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        Err(LedgerError::InsufficientFunds {
            balance: u64::try_from(balance).unwrap_or(0),
            amount: u64::try_from(amount).unwrap_or(0),
        })
    }
}

#[idem_core::async_trait]
impl Ledger for PgLedger {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        let db = |e: sqlx::Error| LedgerError::Unavailable(format!("postgres: {e}"));
        let read = sqlx::query_scalar(AssertSqlSafe(Arc::clone(&self.sql.balance)))
            .persistent(self.persistent)
            .bind(account);
        let found: Option<i64> = if self.persistent {
            read.fetch_optional(self.store.pool()).await.map_err(db)?
        } else {
            // Through a transaction pooler a bound statement is safe only
            // inside a transaction (see `PgStore::behind_transaction_pooler`).
            let mut tx = self.store.begin_transaction().await.map_err(db)?;
            let found = read.fetch_optional(&mut *tx).await.map_err(db)?;
            tx.commit().await.map_err(db)?;
            found
        };
        Ok(found.map_or(OPENING_BALANCE, |b| u64::try_from(b).unwrap_or(0)))
    }

    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError> {
        self.debit_committed_by(account, amount, &|tx| Box::pin(tx.commit_alone()))
            .await
    }

    async fn debit_and_record(
        &self,
        account: &str,
        amount: u64,
        claim: &Claim,
        respond: Respond<'_>,
    ) -> Response {
        let mut tx = match self.store.begin_transaction().await {
            Ok(tx) => tx,
            Err(e) => return respond(Err(LedgerError::Unavailable(format!("postgres: {e}")))),
        };
        let response = respond(self.debit_in(&mut tx, account, amount).await);
        // The debit and its recorded answer commit together, or neither does.
        idem_axum::commit_response(tx, claim, response).await
    }

    async fn debit_committed_by(
        &self,
        account: &str,
        amount: u64,
        commit: Commit<'_>,
    ) -> Result<u64, LedgerError> {
        let mut tx = self
            .store
            .begin_transaction()
            .await
            .map_err(|e| LedgerError::Unavailable(format!("postgres: {e}")))?;
        // A refused debit drops the transaction, which rolls it back.
        let balance = self.debit_in(&mut tx, account, amount).await?;
        commit(LedgerTx::Postgres(tx)).await?;
        Ok(balance)
    }
}

/// The service's state.
#[derive(Clone, FromRef)]
pub struct App {
    /// Runs each debit once per key.
    pub engine: Engine,
    /// The balances.
    pub ledger: Arc<dyn Ledger>,
    /// A simulated delay inside each debit, after the provider's charge.
    pub debit_delay: Duration,
    /// The payment provider each debit charges through, if any
    /// (`PROVIDER_URL`).
    pub provider: Option<ProviderClient>,
}

/// A debit request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Debit {
    /// Minor units to debit; at least 1.
    pub amount: u64,
}

/// The receipt of a debit.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Unique per debit: the record's address and the claim's fencing token.
    pub debit_id: String,
    /// The account debited.
    pub account: String,
    /// The amount debited.
    pub amount: u64,
    /// The balance after the debit.
    pub balance: u64,
}

/// An account and its balance.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The account id.
    pub id: String,
    /// Its balance.
    pub balance: u64,
}

/// The routes. Every error they answer, the extractors' and the router's
/// included, is `application/problem+json` with its own `type`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/accounts/{id}", get(account))
        .route("/accounts/{id}/debits", post(debit))
        .with_state(app)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(idem_axum::problem_json))
}

fn problem(status: StatusCode, slug: &str, title: &str, detail: &str) -> Response {
    let body = serde_json::json!({
        "type": format!("urn:payments:problem:{slug}"),
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// `None` if the id is well formed, else the 400 answer.
pub fn invalid_account(id: &str) -> Option<Response> {
    if !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return None;
    }
    Some(problem(
        StatusCode::BAD_REQUEST,
        "bad-account",
        "Account id is malformed",
        "an account id has 1 to 64 letters, digits, `-` or `_`",
    ))
}

async fn account(State(app): State<App>, Path(id): Path<String>) -> Response {
    if let Some(r) = invalid_account(&id) {
        return r;
    }
    match app.ledger.balance(&id).await {
        Ok(balance) => Json(Account { id, balance }).into_response(),
        Err(e) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "ledger-unavailable",
            "Ledger unavailable",
            &e.to_string(),
        ),
    }
}

/// `POST /accounts/{id}/debits`: debits once per `Idempotency-Key`. The key
/// is scoped by the account, so the same key on two accounts is two debits.
#[idempotent(ttl = "24h", scope = "account", claim = claim)]
async fn debit(
    State(app): State<App>,
    Path(account): Path<String>,
    Json(req): Json<Debit>,
) -> Response {
    if let Some(r) = invalid_account(&account).or_else(|| invalid_amount(&req)) {
        return r;
    }
    // A fencing token is unique only within its record; with the record's
    // address it names this debit and no other.
    let debit_id = format!(
        "dbt_{}_{}",
        &claim.record_id().to_hex()[..16],
        claim.fencing_token()
    );
    let amount = req.amount;
    let answer = |result| debit_answer(&debit_id, &account, amount, result);
    if let Some(provider) = &app.provider {
        // Nothing is charged for a debit the ledger refuses.
        match app.ledger.balance(&account).await {
            Ok(balance) if balance < amount => {
                return answer(Err(LedgerError::InsufficientFunds { balance, amount }));
            }
            Ok(_) => {}
            Err(e) => return answer(Err(e)),
        }
        // The charge's key is the claim's downstream key, which the
        // provider client derives from the claim this debit runs under: the
        // same for every attempt at this debit, so a takeover's repeat is
        // charged once.
        if let Err(e) = provider.charge(&account, amount).await {
            // Whether it charged is unknown: 503 is not recorded, the claim
            // goes, and the retry charges again with the same key.
            return problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "provider-unavailable",
                "Payment provider unavailable",
                &e.to_string(),
            );
        }
    }
    pay_provider(&app).await;
    // Every ledger commits the debit with its recorded answer, and only
    // while the claim holds.
    app.ledger
        .debit_and_record(&account, amount, &claim, &answer)
        .await
}

/// `None` if the amount is in range, else the 400 answer.
pub fn invalid_amount(req: &Debit) -> Option<Response> {
    if req.amount == 0 || req.amount > MAX_AMOUNT {
        return Some(problem(
            StatusCode::BAD_REQUEST,
            "bad-amount",
            "Amount is out of range",
            &format!("send an amount from 1 to {MAX_AMOUNT}"),
        ));
    }
    None
}

/// The slow part of a debit (a payment provider without `PROVIDER_URL`, or
/// the rest of the work after the charge): `DEBIT_DELAY_MS`.
pub async fn pay_provider(app: &App) {
    if !app.debit_delay.is_zero() {
        tokio::time::sleep(app.debit_delay).await;
    }
}

/// The answer to a debit: 201 with the receipt, 402 for insufficient funds
/// (recorded and replayed like a success), 503 if the ledger failed (not
/// recorded: the claim is released and a retry debits).
pub fn debit_answer(
    debit_id: &str,
    account: &str,
    amount: u64,
    result: Result<u64, LedgerError>,
) -> Response {
    match result {
        Ok(balance) => (
            StatusCode::CREATED,
            Json(Receipt {
                debit_id: debit_id.to_owned(),
                account: account.to_owned(),
                amount,
                balance,
            }),
        )
            .into_response(),
        Err(e @ LedgerError::InsufficientFunds { .. }) => problem(
            StatusCode::PAYMENT_REQUIRED,
            "insufficient-funds",
            "Insufficient funds",
            &e.to_string(),
        ),
        Err(e) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "ledger-unavailable",
            "Ledger unavailable",
            &e.to_string(),
        ),
    }
}
