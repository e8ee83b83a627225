//! `MemoryTransaction`: effects kept in this process, applied together with
//! the record and only while the claim holds.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use super::MemoryStore;
use crate::key::RecordId;
use crate::store::{Lease, Outcome, StoreError};
use crate::transaction::StoreTransaction;

type Effect = Box<dyn FnOnce() -> bool + Send>;

/// Runs a transaction's effects in order, stopping at the first that
/// refuses.
pub(super) fn run_effects(effects: Vec<(&'static str, Effect)>) -> Result<(), StoreError> {
    for (what, effect) in effects {
        if !effect() {
            return Err(StoreError::conflict(what));
        }
    }
    Ok(())
}

/// The record a transaction completes.
pub(super) struct RecordWrite {
    pub(super) id: RecordId,
    pub(super) lease: Lease,
    pub(super) outcome: Outcome,
    pub(super) ttl: Duration,
}

/// What a transaction holds until its commit.
pub(super) struct Staged {
    pub(super) effects: Vec<(&'static str, Effect)>,
    pub(super) completion: Option<RecordWrite>,
}

/// The operation's effects on state kept in this process, staged until
/// [`Claim::commit`](crate::Claim::commit) applies them together with the record
/// ([`MemoryStore::transaction`]).
///
/// It is optimistic: compute with what you read, then stage an
/// [`apply`](Self::apply) that, under your state's own lock, checks that
/// what you read still holds and makes the change. The commit takes the
/// record's lock; if the claim no longer holds (it stalled past its lease
/// and another attempt took over, or the record was force-removed), nothing
/// runs ([`CommitError::LeaseLost`]); else the effect runs, and if it
/// refuses (what it read changed), nothing is recorded
/// ([`CommitError::Conflict`]: read again, recompute, commit a new
/// transaction); else the record completes, with no begin, renewal or
/// removal of the record in between. Dropped or rolled back, nothing runs.
///
/// The effect runs under the record's lock: keep it short, and never call
/// the store from it. Its own lock makes its check and its change one step
/// against every other transaction on the same state.
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
///             tx.apply("the balance of alice", move || {
///                 let mut b = b.lock().unwrap();
///                 let balance = b.get_mut("alice").unwrap();
///                 if *balance != seen {
///                     return false; // another debit came first: nothing changed
///                 }
///                 *balance = seen - 30;
///                 true
///             });
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
            .field("effects", &self.staged.effects.len())
            .field("completes", &self.staged.completion.is_some())
            .finish_non_exhaustive()
    }
}

impl MemoryTransaction {
    pub(super) fn new(store: MemoryStore) -> Self {
        Self {
            store,
            staged: Staged {
                effects: Vec::new(),
                completion: None,
            },
        }
    }

    /// Stages an effect, run at the commit once the claim passed, under the
    /// record's lock: it checks that what the transaction read (`what`,
    /// named in the conflict error) still holds and, if so, makes its change
    /// and returns `true`; if not, it changes nothing and returns `false`,
    /// and nothing is recorded. Effects run in order and the first that
    /// refuses ends the commit, the ones before it staying applied: stage
    /// one effect, or put the one that may refuse first.
    pub fn apply(&mut self, what: &'static str, effect: impl FnOnce() -> bool + Send + 'static) {
        self.staged.effects.push((what, Box::new(effect)));
    }
}

#[async_trait]
impl StoreTransaction for MemoryTransaction {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.staged.completion = Some(RecordWrite {
            id: *id,
            lease: *lease,
            outcome: outcome.clone(),
            ttl,
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
