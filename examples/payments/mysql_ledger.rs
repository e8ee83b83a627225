//! Balances in MariaDB or MySQL, beside the idempotency records: each debit
//! commits together with its record, or not at all.

use std::sync::Arc;

use axum::response::Response;
use idem_core::Claim;
use idem_mysql::MySqlStore;
use sqlx::{AssertSqlSafe, MySqlConnection};

use crate::payments::{Commit, Ledger, LedgerError, LedgerTx, Respond, OPENING_BALANCE};

/// Balances in the store's database (table `<prefix>accounts`).
#[derive(Clone)]
pub struct MySqlLedger {
    store: MySqlStore,
    sql: Arc<LedgerSql>,
}

/// The ledger's statements, rendered once for its table.
struct LedgerSql {
    create: Arc<str>,
    open: Arc<str>,
    debit: Arc<str>,
    balance: Arc<str>,
}

#[allow(clippy::needless_pass_by_value)] // the shape `map_err` takes
fn db(e: sqlx::Error) -> LedgerError {
    LedgerError::Unavailable(format!("mysql: {e}"))
}

impl MySqlLedger {
    /// A ledger in `table` (a name the store's own checks accepted) of the
    /// store's database.
    pub fn new(store: MySqlStore, table: &str) -> Self {
        let t = format!("`{table}`");
        let sql = LedgerSql {
            create: format!(
                "CREATE TABLE IF NOT EXISTS {t} (id VARCHAR(64) NOT NULL PRIMARY KEY, \
                 balance BIGINT NOT NULL CHECK (balance >= 0)) ENGINE = InnoDB"
            )
            .into(),
            // An upsert that changes nothing, rather than `INSERT IGNORE`:
            // it locks an existing row exclusively at once, so two debits of
            // one account never both hold a shared lock and then deadlock
            // upgrading it.
            open: format!(
                "INSERT INTO {t} (id, balance) VALUES (?, ?) ON DUPLICATE KEY UPDATE id = id"
            )
            .into(),
            debit: format!("UPDATE {t} SET balance = balance - ? WHERE id = ? AND balance >= ?")
                .into(),
            balance: format!("SELECT balance FROM {t} WHERE id = ?").into(),
        };
        Self {
            store,
            sql: Arc::new(sql),
        }
    }

    /// Creates the accounts table if it does not exist (safe from many
    /// instances at once).
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        sqlx::query(AssertSqlSafe(Arc::clone(&self.sql.create)))
            .execute(self.store.pool())
            .await
            .map(|_| ())
    }

    async fn debit_in(
        &self,
        tx: &mut MySqlConnection,
        account: &str,
        amount: u64,
    ) -> Result<u64, LedgerError> {
        // `apply_debit` refuses amounts over `MAX_AMOUNT` before this.
        let amount = i64::try_from(amount).map_err(|_| {
            LedgerError::Unavailable(format!("amount {amount} is over the ledger's range"))
        })?;
        sqlx::query(AssertSqlSafe(Arc::clone(&self.sql.open)))
            .bind(account)
            .bind(i64::try_from(OPENING_BALANCE).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let debited = sqlx::query(AssertSqlSafe(Arc::clone(&self.sql.debit)))
            .bind(amount)
            .bind(account)
            .bind(amount)
            .execute(&mut *tx)
            .await
            .map_err(db)?
            .rows_affected()
            == 1;
        // The row is this transaction's (locked since the open): its
        // balance is the one after the debit, or the one that refused it.
        let balance: i64 = sqlx::query_scalar(AssertSqlSafe(Arc::clone(&self.sql.balance)))
            .bind(account)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let balance = u64::try_from(balance).unwrap_or(0);
        if debited {
            Ok(balance)
        } else {
            Err(LedgerError::InsufficientFunds {
                balance,
                amount: u64::try_from(amount).unwrap_or(0),
            })
        }
    }
}

#[idem_core::store::async_trait]
impl Ledger for MySqlLedger {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        let found: Option<i64> = sqlx::query_scalar(AssertSqlSafe(Arc::clone(&self.sql.balance)))
            .bind(account)
            .fetch_optional(self.store.pool())
            .await
            .map_err(db)?;
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
            Err(e) => return respond(Err(db(e))),
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
        let mut tx = self.store.begin_transaction().await.map_err(db)?;
        // A refused debit drops the transaction, which rolls it back.
        let balance = self.debit_in(&mut tx, account, amount).await?;
        commit(LedgerTx::MySql(tx)).await?;
        Ok(balance)
    }
}
