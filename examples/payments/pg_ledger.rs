//! [`PgLedger`](crate::pg_ledger::PgLedger): balances in PostgreSQL, each debit committed with its
//! record.

use std::sync::Arc;

use axum::response::Response;
use idem_core::Claim;
use idem_postgres::PgStore;

use crate::ledger::{Commit, Ledger, LedgerError, LedgerTx, Respond, OPENING_BALANCE};
use sqlx::AssertSqlSafe;

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

#[idem_core::store::async_trait]
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
