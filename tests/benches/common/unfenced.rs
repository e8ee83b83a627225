//! A ledger that debits on its own and leaves the record to the engine: the
//! same handler as the routes without idem, the least design's and the
//! peer's (debit, answer, the layer records the answer), where the payments
//! example's own ledgers commit each debit with its record while the claim
//! holds. Also the design before fenced transactions (a holder that lost
//! its claim could still debit), kept to measure what the fence costs.

use idem_examples::payments::{Ledger, LedgerError};

pub(crate) struct Unfenced<L>(pub(crate) L);

#[idem_core::store::async_trait]
impl<L: Ledger> Ledger for Unfenced<L> {
    async fn balance(&self, account: &str) -> Result<u64, LedgerError> {
        self.0.balance(account).await
    }
    async fn debit(&self, account: &str, amount: u64) -> Result<u64, LedgerError> {
        self.0.debit(account, amount).await
    }
}
