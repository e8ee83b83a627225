//! What the payments service asks of where balances live: the [`Ledger`](crate::ledger::Ledger)
//! trait, its errors, and a debit's open transaction ([`LedgerTx`](crate::ledger::LedgerTx)) in the
//! store that keeps the idempotency records.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use axum::response::Response;
use idem_core::{Claim, Lease, MemoryTransaction, Outcome, RecordId, StoreError, StoreTransaction};
use idem_mysql::MySqlTransaction;
use idem_postgres::PgTransaction;
use idem_redis::RedisTransaction;
use idem_sqlite::SqliteTransaction;

/// The balance of a new account.
pub const OPENING_BALANCE: u64 = 10_000;

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
    /// Balances in this process ([`MemoryLedger`](crate::memory_ledger::MemoryLedger)).
    Memory(MemoryTransaction),
    /// Balances in Redis ([`RedisLedger`](crate::redis_ledger::RedisLedger)).
    Redis(RedisTransaction),
    /// Balances in PostgreSQL ([`PgLedger`](crate::pg_ledger::PgLedger)).
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

#[idem_core::store::async_trait]
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
#[idem_core::store::async_trait]
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

/// The balance after debiting `amount` from `balance`, or why not.
pub(crate) fn checked_debit(balance: u64, amount: u64) -> Result<u64, LedgerError> {
    balance
        .checked_sub(amount)
        .ok_or(LedgerError::InsufficientFunds { balance, amount })
}
