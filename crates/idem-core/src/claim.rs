//! `Claim`: the right to run an operation, held while it runs.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::task::futures::TaskLocalFuture;

use crate::commit_error::CommitError;
use crate::decision::Decision;
use crate::key::{DownstreamKeys, IdempotencyKey, RecordId, Scope};
use crate::settled::Settled;
use crate::store::{FencingToken, Lease, Outcome, StoreError, StoreErrorKind};
use crate::transaction::StoreTransaction;

/// The claim an operation runs under, handed to the operation.
///
/// A claim protects the record: once it is lost (the lease ran out and
/// another attempt took the record over, or an operator force-removed it),
/// its holder can no longer complete, release or renew. It cannot by itself
/// stop an effect that is already on its way. Every effect of the operation
/// needs one of three tools, so that a holder that lost its claim does not
/// take effect a second time beside the attempt that took over:
///
/// - **the effect commits with the record**: the operation writes through a
///   [`StoreTransaction`](crate::StoreTransaction) of its store (PostgreSQL,
///   Redis or memory) and hands it to [`commit`](Self::commit), which records
///   the outcome in it and applies both only while the claim holds;
/// - **a key for the downstream call**: [`downstream_key`](Self::downstream_key)
///   is the same for every attempt at this request, takeovers included, so an
///   idempotent downstream service (a payment provider) deduplicates the
///   repeat;
/// - **the fencing token**: [`fencing_token`](Self::fencing_token) grows with
///   each claim of the record, so a resource that remembers the highest token
///   it saw refuses a late holder.
#[derive(Clone, Debug)]
pub struct Claim {
    id: RecordId,
    lease: Lease,
    ttl: Duration,
    shared: Arc<ClaimShared>,
}

/// What the engine and the operation learn about a claim while it is held,
/// shared between the [`Claim`] and the engine's lease work.
#[derive(Debug)]
pub(crate) struct ClaimShared {
    /// A renewal found the claim lost.
    pub(crate) lost: AtomicBool,
    /// The engine stored the operation's outcome (its completion answered).
    pub(crate) completed: AtomicBool,
    /// How the operation settled the claim itself, if it did.
    settled: OnceLock<Settled>,
    downstream: DownstreamKeys,
}

impl ClaimShared {
    pub(crate) fn new(scope: &Scope, key: &IdempotencyKey) -> Arc<Self> {
        Arc::new(Self {
            lost: AtomicBool::new(false),
            completed: AtomicBool::new(false),
            settled: OnceLock::new(),
            downstream: DownstreamKeys::new(scope, key),
        })
    }

    pub(crate) fn settled(&self) -> Option<Settled> {
        self.settled.get().copied()
    }
}

tokio::task_local! {
    /// The claim of the operation this task runs.
    static CURRENT: Claim;
}

impl Claim {
    /// The claim of the idempotent operation the current task runs (an
    /// `Engine::run` or `execute` operation, or a covered handler), if any:
    /// for a client that derives the keys of the operation's downstream
    /// calls from it ([`downstream_key`](Self::downstream_key)), so that a
    /// takeover that runs the operation again repeats those calls under the
    /// same keys. Tasks the operation spawns do not see it.
    pub fn current() -> Option<Claim> {
        CURRENT.try_with(Claim::clone).ok()
    }

    /// Runs `operation` with `self` as the [`current`](Self::current)
    /// claim.
    pub(crate) fn run_as_current<F: Future>(self, operation: F) -> TaskLocalFuture<Claim, F> {
        // Not an `async fn`: one would hold `operation` twice.
        CURRENT.scope(self, operation)
    }

    pub(crate) fn new(id: RecordId, lease: Lease, ttl: Duration, shared: Arc<ClaimShared>) -> Self {
        Self {
            id,
            lease,
            ttl,
            shared,
        }
    }

    /// The record's address.
    pub fn record_id(&self) -> &RecordId {
        &self.id
    }

    /// The lease as granted.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing token of this claim: greater than the token of every
    /// earlier claim of the same record, so that a resource that keeps the
    /// highest token it saw for this record can refuse a holder whose claim
    /// was taken over.
    pub fn fencing_token(&self) -> FencingToken {
        self.lease.token
    }

    /// How long the record is kept once completed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether a renewal found the claim lost (lease ran out, taken over).
    /// Only a hint: a claim can be lost right after this answers `false`;
    /// use [`commit`](Self::commit) or [`downstream_key`](Self::downstream_key)
    /// for effects that must not happen twice.
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// The idempotency key for the downstream call named `call` (`"charge"`,
    /// say) made while running this request: the same for every attempt at
    /// this request (retries, and an attempt that took the claim over after
    /// its holder stalled), different for every `call` name and every
    /// request. Send it as the downstream service's idempotency key, and a
    /// call repeated by a takeover is deduplicated there.
    ///
    /// It is a keyed digest of the scope, the client's key and `call`
    /// (`idem-` and 64 hex digits): nobody who does not know the scope and
    /// the key can compute it, and it reveals neither; the record's address,
    /// which shows in logs, is not enough.
    ///
    /// ```
    /// # use idem_core::{Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Never, Scope};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let engine = Engine::new(MemoryStore::new());
    /// let call = Call::new(Scope::new("acct-1"), IdempotencyKey::parse("k-1")?, Fingerprint::of("pay", &100)?);
    /// engine
    ///     .run(&call, |claim| async move {
    ///         let charge_key = claim.downstream_key("charge");
    ///         assert!(charge_key.as_str().starts_with("idem-"));
    ///         Ok::<_, Never>(())
    ///     })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn downstream_key(&self, call: &str) -> IdempotencyKey {
        self.shared.downstream.key(call)
    }

    /// Whether the operation settled this claim itself, with
    /// [`commit`](Self::commit) or [`roll_back`](Self::roll_back): the
    /// engine then does what that said, whatever the operation returns.
    pub fn is_settled(&self) -> bool {
        self.shared.settled().is_some()
    }

    /// Whether the operation's outcome is stored: the engine's completion
    /// was answered, or [`commit`](Claim::commit) recorded it with the
    /// operation's writes. Read after the engine returns, it tells an
    /// outcome that retries will be answered with from one still being
    /// recorded in the background (the store was down): a queue consumer
    /// acknowledges its message only in the first case.
    pub fn is_recorded(&self) -> bool {
        self.shared.completed.load(Ordering::SeqCst)
            || self.shared.settled() == Some(Settled::Recorded)
    }

    /// Settles the claim for the engine (once; later calls change nothing).
    fn settle(&self, settled: Settled) {
        let _ = self.shared.settled.set(settled);
    }

    /// Records `outcome` in `tx`, the operation's own open transaction of its
    /// store, and commits: the operation's writes in `tx` and its record
    /// take effect together, and only while this claim holds. A holder that
    /// lost its claim (it stalled past its lease and another attempt took
    /// over, or the record was force-removed) has its transaction rolled
    /// back: its effects never happen, and only the attempt that holds the
    /// claim takes effect.
    ///
    /// The engine learns the result from the claim: after `Ok`, it records
    /// nothing more and returns what the operation returns; after an error,
    /// it keeps or releases the claim as [`CommitError`] says. Call it once,
    /// last, and return.
    ///
    /// What holds the claim at the commit differs by store, and so does what
    /// happens to a holder stalled in the middle: PostgreSQL locks the
    /// record's row from the completion to the commit (a takeover waits);
    /// Redis and memory check the claim and what the transaction read, then
    /// apply its writes and the record in one atomic step
    /// ([`CommitError::Conflict`] if what it read changed).
    pub async fn commit<T: StoreTransaction>(
        &self,
        mut tx: T,
        outcome: &Outcome,
    ) -> Result<(), CommitError> {
        if let Err(e) = tx.complete(&self.id, &self.lease, outcome, self.ttl).await {
            rollback(tx, self).await;
            return Err(self.failed(e, false));
        }
        match tx.commit().await {
            Ok(()) => {
                self.settle(Settled::Recorded);
                Ok(())
            }
            Err(e) => Err(self.failed(e, true)),
        }
    }

    /// Rolls `tx` back: none of the operation's writes happen, and the
    /// engine releases the claim so that a retry runs again (an answer the
    /// policy does not record, a 5xx say). Only for an operation whose every
    /// effect was in `tx`.
    pub async fn roll_back<T: StoreTransaction>(&self, tx: T) {
        rollback(tx, self).await;
        self.give_up();
    }

    /// Tells the engine that none of the operation's effects happened (its
    /// transaction was rolled back, or its commit conflicted and it will not
    /// try again): the claim is released when the operation returns, so
    /// that a retry runs again, whatever the operation returns.
    pub fn give_up(&self) {
        self.settle(Settled::Released);
    }

    fn failed(&self, e: StoreError, committing: bool) -> CommitError {
        if e.is_lease_lost() {
            tracing::warn!(target: "idem", record = %self.record_id(), token = self.fencing_token().0, decision = Decision::LeaseLost.as_str(), "the claim was lost before the commit; the transaction was rolled back");
            self.settle(Settled::Kept);
            CommitError::LeaseLost
        } else if e.is_conflict() {
            CommitError::Conflict(e)
        } else if committing && e.kind() != StoreErrorKind::Unsupported {
            tracing::error!(target: "idem", record = %self.record_id(), error = %e, decision = Decision::CommitUncertain.as_str(), "whether the transaction with the record committed is unknown; the claim is kept until its lease ends");
            self.settle(Settled::Kept);
            CommitError::Uncertain(e)
        } else {
            tracing::warn!(target: "idem", record = %self.record_id(), error = %e, decision = Decision::RolledBack.as_str(), "the outcome could not be recorded in the transaction; rolled back, and the claim is released");
            self.settle(Settled::Released);
            CommitError::RolledBack(e)
        }
    }
}

async fn rollback<T: StoreTransaction>(tx: T, claim: &Claim) {
    if let Err(e) = tx.rollback().await {
        // A database rolls back a transaction whose connection is gone.
        tracing::warn!(target: "idem", record = %claim.record_id(), error = %e, "rollback failed");
    }
}
