//! `MemoryTransaction`: effects kept in this process, applied together with
//! the record and only while the claim holds.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use super::MemoryStore;
use crate::claim::Claim;
use crate::key::RecordId;
use crate::store::{Lease, Outcome, StoreError};
use crate::transaction::StoreTransaction;

type Check = Box<dyn FnOnce() -> bool + Send>;
type Write = Box<dyn FnOnce() + Send>;

/// The record a transaction completes.
pub(super) struct Completion {
    pub(super) id: RecordId,
    pub(super) lease: Lease,
    pub(super) outcome: Outcome,
    pub(super) ttl: Duration,
}

/// What a transaction holds until its commit.
pub(super) struct Staged {
    pub(super) checks: Vec<(&'static str, Check)>,
    pub(super) writes: Vec<Write>,
    pub(super) completion: Option<Completion>,
}

/// The operation's effects on state kept in this process, staged until
/// [`Claim::commit`] applies them together with the record
/// ([`MemoryStore::transaction`]).
///
/// It is optimistic: compute with what you read, then stage
/// [`check`](Self::check)s that what you read still holds and
/// [`write`](Self::write)s that apply the change. The commit takes the
/// store's commit lock and the record's lock; if the claim no longer holds
/// (it stalled past its lease and another attempt took over, or the record
/// was force-removed), nothing runs ([`CommitError::LeaseLost`]); if a
/// check fails, nothing is written ([`CommitError::Conflict`]: read again,
/// recompute, commit a new transaction); else every write runs, in order,
/// and the record completes, with no begin, renewal, removal or other
/// commit in between. Dropped or rolled back, nothing runs. Committed
/// without a record ([`StoreTransaction::commit`] directly, outside idem),
/// the checks and writes run under the commit lock alone.
///
/// The closures run under the store's locks: keep them short, and never
/// call the store from one. Checks and writes of every memory transaction
/// are serialized; code that changes the same state outside transactions
/// must take the state's own lock as usual.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
/// use idem_core::{Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Never, Outcome, Scope};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::new();
/// let engine = Engine::new(store.clone());
/// let balances = Arc::new(Mutex::new(HashMap::from([("alice".to_string(), 100_u64)])));
/// let call = Call::new(Scope::new("alice"), IdempotencyKey::parse("k-1")?, Fingerprint::of("debit", &30)?);
///
/// engine
///     .run(&call, |claim| async move {
///         loop {
///             let seen = balances.lock().unwrap()["alice"];
///             let mut tx = store.transaction();
///             let b = Arc::clone(&balances);
///             tx.check("the balance of alice", move || b.lock().unwrap()["alice"] == seen);
///             let b = Arc::clone(&balances);
///             tx.write(move || *b.lock().unwrap().get_mut("alice").unwrap() = seen - 30);
///             let outcome = idem_core::encode_result::<u64, Never>(&Ok(seen - 30)).expect("a u64 encodes");
///             match claim.commit(tx, &outcome).await {
///                 Ok(()) => return Ok::<_, Never>(seen - 30),
///                 Err(e) if e.is_conflict() => continue,
///                 Err(e) => panic!("{e}"),
///             }
///         }
///     })
///     .await?;
/// # Ok(())
/// # }
/// ```
///
/// [`CommitError::LeaseLost`]: crate::CommitError::LeaseLost
/// [`CommitError::Conflict`]: crate::CommitError::Conflict
pub struct MemoryTransaction {
    store: MemoryStore,
    staged: Staged,
}

impl fmt::Debug for MemoryTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTransaction")
            .field("checks", &self.staged.checks.len())
            .field("writes", &self.staged.writes.len())
            .field("completes", &self.staged.completion.is_some())
            .finish_non_exhaustive()
    }
}

impl MemoryTransaction {
    pub(super) fn new(store: MemoryStore) -> Self {
        Self {
            store,
            staged: Staged {
                checks: Vec::new(),
                writes: Vec::new(),
                completion: None,
            },
        }
    }

    /// Stages a check, run at the commit before any write: `true` if what
    /// the transaction read (`what`, named in the conflict error) still
    /// holds. One `false` and nothing is written.
    pub fn check(&mut self, what: &'static str, check: impl FnOnce() -> bool + Send + 'static) {
        self.staged.checks.push((what, Box::new(check)));
    }

    /// Stages a write, run at the commit once the claim and every check
    /// passed.
    pub fn write(&mut self, write: impl FnOnce() + Send + 'static) {
        self.staged.writes.push(Box::new(write));
    }
}

#[async_trait]
impl StoreTransaction for MemoryTransaction {
    async fn complete(&mut self, claim: &Claim, outcome: &Outcome) -> Result<(), StoreError> {
        self.staged.completion = Some(Completion {
            id: *claim.record_id(),
            lease: *claim.lease(),
            outcome: outcome.clone(),
            ttl: claim.ttl(),
        });
        Ok(())
    }

    async fn commit(self) -> Result<(), StoreError> {
        self.store.commit(self.staged)
    }

    async fn rollback(self) -> Result<(), StoreError> {
        Ok(())
    }
}
