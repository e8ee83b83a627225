//! Balances in SQLite, in the same file as the idempotency records: each
//! debit commits together with its record, or not at all, and both survive
//! a restart with nothing to install.

use axum::response::Response;
use idem_core::Claim;
use idem_sqlite::SqliteStore;
use sqlx::SqliteConnection;

use crate::payments::{Commit, Ledger, LedgerError, LedgerTx, Respond, OPENING_BALANCE};

#[allow(clippy::needless_pass_by_value)] // the shape `map_err` takes
fn db(e: sqlx::Error) -> LedgerError {
    LedgerError::Unavailable(format!("sqlite: {e}"))
}

/// Balances in the store's file (table `accounts`).
#[derive(Clone)]
pub struct SqliteLedger {
    store: SqliteStore,
}

impl SqliteLedger {
    /// A ledger in the store's file.
    pub fn new(store: SqliteStore) -> Self {
        Self { store }
    }

    /// Creates the accounts table if it does not exist.
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS accounts \
             (id TEXT NOT NULL PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0))",
        )
        .execute(self.store.pool())
        .await
        .map(|_| ())
    }

    /// The debit, in `tx` (which holds SQLite's write lock since it began):
    /// the balance after it, or the one that refused it.
    async fn debit_in(
        tx: &mut SqliteConnection,
        account: &str,
        amount: u64,
    ) -> Result<u64, LedgerError> {
        // `apply_debit` refuses amounts over `MAX_AMOUNT` before this.
        let wanted = i64::try_from(amount).map_err(|_| {
            LedgerError::Unavailable(format!("amount {amount} is over the ledger's range"))
        })?;
        sqlx::query(
            "INSERT INTO accounts (id, balance) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
        )
        .bind(account)
        .bind(i64::try_from(OPENING_BALANCE).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let after: Option<i64> = sqlx::query_scalar(
            "UPDATE accounts SET balance = balance - ?2 WHERE id = ?1 AND balance >= ?2 \
             RETURNING balance",
        )
        .bind(account)
        .bind(wanted)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        match after {
            Some(after) => Ok(u64::try_from(after).unwrap_or(0)),
            None => Err(LedgerError::InsufficientFunds {
                balance: read_balance(&mut *tx, account).await?,
                amount,
            }),
        }
    }
}

async fn read_balance(
    executor: impl sqlx::SqliteExecutor<'_>,
    account: &str,
) -> Result<u64, LedgerError> {
    let found: Option<i64> = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = ?1")
        .bind(account)
        .fetch_optional(executor)
        .await
        .map_err(db)?;
    Ok(found.map_or(OPENING_BALANCE, |b| u64::try_from(b).unwrap_or(0)))
}

#[idem_core::store::async_trait]
impl Ledger for SqliteLedger {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        read_balance(self.store.pool(), account).await
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
        let debited = match self.store.begin_transaction().await {
            Ok(mut tx) => {
                let answer = respond(Self::debit_in(&mut tx, account, amount).await);
                // The debit and its recorded answer commit together, or
                // neither does.
                return idem_axum::commit_response(tx, claim, answer).await;
            }
            Err(e) => Err(db(e)),
        };
        respond(debited)
    }

    async fn debit_committed_by(
        &self,
        account: &str,
        amount: u64,
        commit: Commit<'_>,
    ) -> Result<u64, LedgerError> {
        let mut tx = self.store.begin_transaction().await.map_err(db)?;
        // A refused debit drops the transaction, which rolls it back.
        let balance = Self::debit_in(&mut tx, account, amount).await?;
        commit(LedgerTx::Sqlite(tx)).await?;
        Ok(balance)
    }
}
