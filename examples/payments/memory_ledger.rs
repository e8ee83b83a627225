//! [`MemoryLedger`](crate::memory_ledger::MemoryLedger): balances in the process's memory, beside the
//! [`MemoryStore`](idem_core::MemoryStore)'s records.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::Response;
use idem_core::{Claim, MemoryStore, MemoryTransaction};

use crate::ledger::{
    checked_debit, Commit, Ledger, LedgerError, LedgerTx, Respond, OPENING_BALANCE,
};

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

#[idem_core::store::async_trait]
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
