//! The `Engine`: runs an operation once per idempotency key.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::Error;
use crate::failure::Failure;
use crate::fingerprint::Fingerprint;
use crate::key::{IdempotencyKey, RecordId, Scope};
use crate::pending_begin::PendingBegin;
use crate::ran::Ran;
use crate::result_codec::{ErrCodec, OkCodec, ResultCodec};
use crate::settle::{settle_later, Settle, FIRST_PAUSE};
use crate::store::{Begin, FencingToken, Lease, Outcome, Store, StoreError};

/// The default lease: how long a claim lives without renewal.
///
/// It bounds how long a holder that crashed (or stalled, or whose caller
/// dropped the operation mid-way) keeps its key from every retry: 10 seconds.
/// A running operation never feels it, since the engine renews the lease every
/// third of it while the operation runs, so a slow operation keeps its claim
/// as long as the store answers one renewal in each 10-second window. A
/// shorter lease frees keys sooner but loses the claim of a live holder when
/// the store stays unreachable for longer than the lease (the holder's result
/// is then not recorded, and a retry after the takeover runs it again; pass
/// the fencing token downstream to refuse the late holder).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// What to do when a duplicate arrives while the first request still runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnInFlight {
    /// Answer [`Error::InFlight`] at once, with the time left on the lease.
    #[default]
    Reject,
    /// Poll with backoff for up to `max`: replay the first result if it lands in
    /// time, run the operation if the first holder gave up, else answer
    /// [`Error::InFlight`].
    Wait {
        /// The longest time to wait.
        max: Duration,
    },
}

/// How the engine keeps records. Cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    ttl: Duration,
    lease: Duration,
    on_in_flight: OnInFlight,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(24 * 60 * 60),
            lease: DEFAULT_LEASE,
            on_in_flight: OnInFlight::Reject,
        }
    }
}

const MIN_DURATION: Duration = Duration::from_millis(1);

impl Policy {
    /// How long a completed record is kept (default 24h, at least 1ms).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(MIN_DURATION);
        self
    }

    /// How long a claim lives without renewal (default [`DEFAULT_LEASE`], 10s;
    /// at least 1ms). While the operation runs, the engine renews it every
    /// third of this. It is also how long a key stays claimed after its holder
    /// crashed or its operation was dropped mid-way: see [`Engine::run`].
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(MIN_DURATION);
        self
    }

    /// What a duplicate in flight gets (default [`OnInFlight::Reject`]).
    #[must_use]
    pub fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.on_in_flight = on_in_flight;
        self
    }

    /// The configured record lifetime.
    pub fn ttl_value(&self) -> Duration {
        self.ttl
    }

    /// The configured lease.
    pub fn lease_value(&self) -> Duration {
        self.lease
    }

    /// The configured duplicate handling.
    pub fn on_in_flight_value(&self) -> OnInFlight {
        self.on_in_flight
    }
}

/// One idempotent invocation: who asks (scope), under which key, for what
/// (fingerprint), with optional per-call policy overrides.
#[derive(Clone, Debug)]
pub struct Call {
    scope: Scope,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    id: RecordId,
    ttl: Option<Duration>,
    lease: Option<Duration>,
    on_in_flight: Option<OnInFlight>,
}

impl Call {
    /// A call of the request `fingerprint` under `key` in `scope`.
    pub fn new(scope: impl Into<Scope>, key: IdempotencyKey, fingerprint: Fingerprint) -> Self {
        let scope = scope.into();
        let id = RecordId::new(&scope, &key);
        Self {
            scope,
            key,
            fingerprint,
            id,
            ttl: None,
            lease: None,
            on_in_flight: None,
        }
    }

    /// Overrides the engine's record lifetime for this call.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl.max(MIN_DURATION));
        self
    }

    /// Overrides the engine's lease for this call.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease.max(MIN_DURATION));
        self
    }

    /// Overrides the engine's duplicate handling for this call.
    #[must_use]
    pub fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.on_in_flight = Some(on_in_flight);
        self
    }

    /// The scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The record address (digest of scope and key).
    pub fn record_id(&self) -> &RecordId {
        &self.id
    }
}

/// The claim an operation runs under, handed to the operation.
///
/// Pass [`fencing_token`](Self::fencing_token) to downstream systems so that
/// they can refuse a holder whose claim was taken over. A store that supports it
/// can complete the record inside the operation's own database transaction with
/// this claim (see `idem-postgres`); the store then marks the claim
/// ([`mark_completed_externally`](Self::mark_completed_externally)) and the
/// engine skips its own completion.
#[derive(Clone, Debug)]
pub struct Claim {
    id: RecordId,
    lease: Lease,
    ttl: Duration,
    lost: Arc<AtomicBool>,
    completed_externally: Arc<AtomicBool>,
}

impl Claim {
    /// The record's address.
    pub fn record_id(&self) -> &RecordId {
        &self.id
    }

    /// The lease as granted.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing token of this claim.
    pub fn fencing_token(&self) -> FencingToken {
        self.lease.token
    }

    /// How long the record is kept once completed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether a renewal found the claim lost (lease ran out, taken over). An
    /// operation may check this before an irreversible step.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Tells the engine that the record was completed outside it, inside the
    /// operation's own database transaction, so that it does not complete it
    /// again when the operation returns a result to record. Store adapters
    /// call this after their in-transaction completion succeeded (see
    /// `idem-postgres`); if the transaction then fails to commit, the operation
    /// returns an error and the engine releases the claim as usual.
    pub fn mark_completed_externally(&self) {
        self.completed_externally.store(true, Ordering::SeqCst);
    }

    /// Whether [`mark_completed_externally`](Self::mark_completed_externally) was called.
    pub fn is_completed_externally(&self) -> bool {
        self.completed_externally.load(Ordering::SeqCst)
    }
}

/// What a low-level operation (see [`Engine::execute`]) asks the engine to do
/// with its claim.
#[derive(Debug)]
pub enum Completion<T> {
    /// Record `outcome` and return `value` to the caller.
    Record {
        /// What this caller gets.
        value: T,
        /// What every retry gets.
        outcome: Outcome,
    },
    /// Record nothing and give the claim up, so a retry runs again. Only for
    /// an operation known to have taken no effect (see
    /// [When a claim is given up](Engine#when-a-claim-is-given-up)).
    Release(T),
    /// Record nothing and keep the claim until its lease ends: the operation
    /// may have taken effect, but it has no outcome to record. Retries are
    /// told it is in flight until then.
    Keep(T),
    /// The operation recorded its outcome itself, in the transaction that
    /// committed its effects (see [`StoreTransaction`](crate::StoreTransaction)):
    /// the engine has nothing left to record and returns `T` to the caller.
    Recorded(T),
}

/// The result of [`Engine::execute`].
#[derive(Debug)]
pub enum Execution<T> {
    /// The operation ran now.
    Executed(T),
    /// The operation had run; here is its recorded outcome for the caller to decode.
    Replayed(Outcome),
}

/// Runs operations at most once per `(scope, key)`, records their results, and
/// replays them to retries.
///
/// Cheap to clone: it holds an `Arc` of the store and a copy of the policy.
///
/// # When a claim is given up
///
/// A claim is released, so that a retry runs the operation again, only when
/// the operation's effects are known not to have happened:
///
/// - the operation never started: its caller went away while the claim was
///   being taken (the claim is released as soon as the store's answer
///   arrives, in the background);
/// - the operation returned a transient failure ([`Failure::is_final`] is
///   `false`), its own statement that nothing took effect; a low-level
///   operation returned [`Completion::Release`] (an HTTP handler's 5xx answer,
///   say; a database transaction that rolled back);
///
/// Anything else is an **unknown outcome** and keeps the claim until its
/// lease ends ([`DEFAULT_LEASE`], 10 seconds, unless the policy says
/// otherwise): the future dropped while the operation runs (a timeout, a
/// `select!`, a client that disconnected), a panic in the operation, or a
/// result that cannot be encoded for the record ([`Completion::Keep`]). A
/// retry meanwhile gets [`Error::InFlight`]; after the lease a retry runs the
/// operation again, so an operation with effects elsewhere should pass the
/// claim's [fencing token](Claim::fencing_token) downstream. A release or a
/// completion that the store refuses for a while is retried in the
/// background while the lease lasts.
///
/// To make a caller that goes away harmless, do not let it cancel the
/// operation: run it on a task of its own, or hand it to one when the caller
/// drops it (the HTTP adapter, `idem-axum`, does the latter for every
/// handler); the operation then finishes and is recorded whether or not
/// anyone still listens.
///
/// ```
/// use idem_core::{Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Ran, Scope};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::new(MemoryStore::new());
/// let msg = serde_json::json!({"order": 42, "sku": "tea"});
/// let call = Call::new(
///     Scope::new("orders"),
///     IdempotencyKey::parse("msg-7f3a")?,
///     Fingerprint::of("ship-order", &msg)?,
/// );
///
/// let first = engine
///     .run(&call, |_claim| async { Ok::<_, idem_core::Never>(String::from("shipment-1")) })
///     .await?;
/// let again = engine
///     .run(&call, |_claim| async { Ok::<_, idem_core::Never>(String::from("shipment-2")) })
///     .await?;
/// assert_eq!(first, Ran::Executed("shipment-1".to_string()));
/// assert_eq!(again, Ran::Replayed("shipment-1".to_string()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    policy: Policy,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `store` with the default [`Policy`].
    pub fn new(store: impl Store) -> Self {
        Self::from_arc(Arc::new(store))
    }

    /// An engine over a shared store.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            policy: Policy::default(),
        }
    }

    /// Replaces the policy.
    #[must_use]
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Runs `op` once for `call`, recording its result; retries get the
    /// recorded result back.
    ///
    /// - `Ok(t)` is recorded: this call gets `Ok(Ran::Executed(t))`, every
    ///   retry `Ok(Ran::Replayed(t))`.
    /// - `Err(e)` with [`e.is_final()`](Failure::is_final) is recorded the same
    ///   way and comes back as [`Error::Failed`].
    /// - `Err(e)` that is not final releases the claim: this call gets
    ///   `Error::Failed(Ran::Executed(e))` and a retry runs `op` again.
    /// - If the returned future is dropped while the claim is being taken,
    ///   `op` does not run and the claim is released as soon as it lands.
    /// - If it is dropped, or `op` panics, while `op` runs, the outcome is
    ///   unknown: the claim is kept until its lease ends (see
    ///   [When a claim is given up](Engine#when-a-claim-is-given-up)). If it
    ///   is dropped after `op` returned, while the result is being recorded,
    ///   the recording goes on in the background as below.
    /// - If the store cannot record the result (it is down), this call still
    ///   gets its result (the effect happened), and the engine keeps trying
    ///   to record it in the background while the lease lasts; retries in
    ///   the meantime find the claim in flight. Only a store that stays away
    ///   past the lease loses the result, and a retry after that runs again.
    pub async fn run<T, E, F, Fut>(&self, call: &Call, op: F) -> Result<Ran<T>, Error<E>>
    where
        T: Serialize + DeserializeOwned,
        E: Failure + Serialize + DeserializeOwned,
        F: FnOnce(Claim) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let codec = ResultCodec {
            ok: OkCodec::new(),
            err: ErrCodec::new(),
        };
        self.run_with(call, codec, op).await
    }

    /// [`run`](Self::run) with a codec made elsewhere (by the attribute's
    /// generated code, where the user wrote each type).
    pub(crate) async fn run_with<T, E, F, Fut>(
        &self,
        call: &Call,
        codec: ResultCodec<T, E>,
        op: F,
    ) -> Result<Ran<T>, Error<E>>
    where
        F: FnOnce(Claim) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let codec = &codec;
        let executed = self
            .execute(call, |claim| async move {
                let result = op(claim).await;
                if !codec.is_recorded(&result) {
                    return Completion::Release(Ok(result));
                }
                match codec.encode(&result) {
                    Ok(outcome) => Completion::Record {
                        value: Ok(result),
                        outcome,
                    },
                    // The operation ran; without a record a retry would run
                    // it again at once.
                    Err(codec) => Completion::Keep(Err(codec)),
                }
            })
            .await
            .map_err(Error::cast)?;
        match executed {
            Execution::Executed(Ok(Ok(t))) => Ok(Ran::Executed(t)),
            Execution::Executed(Ok(Err(e))) => Err(Error::Failed(Ran::Executed(e))),
            Execution::Executed(Err(codec)) => Err(Error::Codec(codec)),
            Execution::Replayed(outcome) => match codec.decode(&outcome) {
                Ok(Ok(t)) => Ok(Ran::Replayed(t)),
                Ok(Err(e)) => Err(Error::Failed(Ran::Replayed(e))),
                Err(codec) => {
                    tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %codec, "recorded result cannot be decoded");
                    Err(Error::Codec(codec))
                }
            },
        }
    }

    /// The low-level form of [`run`](Self::run), for adapters that encode
    /// outcomes themselves (an HTTP response, say): `op` says per result whether
    /// to record it (and as what) or to release the claim; a replay hands back
    /// the raw [`Outcome`].
    pub async fn execute<T, F, Fut>(&self, call: &Call, op: F) -> Result<Execution<T>, Error>
    where
        F: FnOnce(Claim) -> Fut,
        Fut: Future<Output = Completion<T>>,
    {
        let ttl = call.ttl.unwrap_or(self.policy.ttl);
        let lease_len = call.lease.unwrap_or(self.policy.lease);
        let on_in_flight = call.on_in_flight.unwrap_or(self.policy.on_in_flight);
        let lease = match self.acquire(call, lease_len, on_in_flight).await? {
            Acquire::Lease(lease) => lease,
            Acquire::Replay(outcome) => return Ok(Execution::Replayed(outcome)),
        };

        let lost = Arc::new(AtomicBool::new(false));
        let mut guard = Guard {
            store: Arc::clone(&self.store),
            id: call.id,
            lease,
            ttl,
            state: GuardState::Running,
            renewal: None,
            scope: &call.scope,
        };
        let completed_externally = Arc::new(AtomicBool::new(false));
        let claim = Claim {
            id: call.id,
            lease,
            ttl,
            lost: Arc::clone(&lost),
            completed_externally: Arc::clone(&completed_externally),
        };
        let renew_every = lease_len / 3;
        let fut = op(claim);
        tokio::pin!(fut);
        // Most operations end well within a third of the lease; only a slower
        // one pays for a renewal task.
        let completion = if let Ok(completion) = tokio::time::timeout(renew_every, &mut fut).await {
            completion
        } else {
            {
                guard.renewal = Some(tokio::spawn(renew_loop(
                    Arc::clone(&self.store),
                    call.id,
                    lease,
                    renew_every,
                    lost,
                    call.scope.clone(),
                )));
                fut.await
            }
        };
        if let Some(renewal) = guard.renewal.take() {
            renewal.abort();
        }

        match completion {
            Completion::Record { value, .. } if completed_externally.load(Ordering::SeqCst) => {
                guard.state = GuardState::Done;
                decision(call, "completed_in_transaction");
                Ok(Execution::Executed(value))
            }
            Completion::Record { value, outcome } => {
                guard.state = GuardState::Completing(outcome);
                let done = guard.complete().await;
                match done {
                    Ok(()) => {
                        decision(call, "completed");
                        Ok(Execution::Executed(value))
                    }
                    Err(e) if e.is_lease_lost() => {
                        tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, token = lease.token.0, decision = "lease_lost", "the operation finished after its claim was lost; its result is not recorded");
                        Err(Error::LeaseLost)
                    }
                    Err(e) => {
                        // The effect happened: keep trying to record it in the
                        // background while the lease lasts, so that a store
                        // that comes back in time still answers retries with
                        // this result instead of running the operation again.
                        tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = "completing_in_background", "the operation ran but its result could not be recorded yet; retrying in the background while the lease lasts");
                        if let Some(outcome) = guard.take_outcome() {
                            settle_later(
                                Arc::clone(&self.store),
                                call.id,
                                lease,
                                Settle::Complete { outcome, ttl },
                                call.scope.clone(),
                                FIRST_PAUSE,
                            );
                        }
                        Ok(Execution::Executed(value))
                    }
                }
            }
            Completion::Recorded(value) => {
                guard.state = GuardState::Done;
                decision(call, "completed_in_transaction");
                Ok(Execution::Executed(value))
            }
            Completion::Keep(value) => {
                guard.state = GuardState::Done;
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, token = lease.token.0, decision = "kept", "the operation has no outcome to record; its claim is kept until the lease ends");
                Ok(Execution::Executed(value))
            }
            Completion::Release(value) => {
                guard.state = GuardState::Releasing;
                self.release(call, lease).await;
                guard.state = GuardState::Done;
                Ok(Execution::Executed(value))
            }
        }
    }

    /// Gives up a claim under which nothing took effect; a store that does
    /// not answer now gets more tries in the background.
    async fn release(&self, call: &Call, lease: Lease) {
        match self.store.release(&call.id, &lease).await {
            Ok(()) => decision(call, "released"),
            Err(e) if e.is_transient() => {
                // Nothing took effect: a retry should run soon,
                // not after the whole lease.
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = "releasing_in_background", "the claim could not be released yet; retrying in the background while the lease lasts");
                settle_later(
                    Arc::clone(&self.store),
                    call.id,
                    lease,
                    Settle::Release,
                    call.scope.clone(),
                    FIRST_PAUSE,
                );
            }
            Err(e) => {
                tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = "release_failed", "the claim could not be released; it ends with its lease");
            }
        }
    }

    async fn acquire(
        &self,
        call: &Call,
        lease: Duration,
        on_in_flight: OnInFlight,
    ) -> Result<Acquire, Error> {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(5);
        loop {
            let begin =
                PendingBegin::send(&self.store, call.id, &call.scope, call.fingerprint, lease)
                    .await;
            match begin {
                Ok(Begin::Acquired(lease)) => {
                    tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, token = lease.token.0, decision = "acquired");
                    return Ok(Acquire::Lease(lease));
                }
                Ok(Begin::Replay(outcome)) => {
                    decision(call, "replayed");
                    return Ok(Acquire::Replay(outcome));
                }
                Ok(Begin::Mismatch) => {
                    decision(call, "mismatch");
                    return Err(Error::Mismatch);
                }
                Ok(Begin::InFlight { retry_after }) => {
                    let waited = started.elapsed();
                    let left = match on_in_flight {
                        OnInFlight::Wait { max } if waited < max => max.saturating_sub(waited),
                        _ => {
                            decision(call, "in_flight");
                            return Err(Error::InFlight { retry_after });
                        }
                    };
                    tracing::trace!(target: "idem", scope = %call.scope, record = %call.id, decision = "waiting");
                    tokio::time::sleep(backoff.min(left).min(retry_after.max(MIN_DURATION))).await;
                    backoff = (backoff * 2).min(Duration::from_millis(250));
                }
                Err(e) => {
                    tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = "store_error", "the store did not answer; the operation does not run");
                    return Err(Error::Store(e));
                }
            }
        }
    }
}

enum Acquire {
    Lease(Lease),
    Replay(Outcome),
}

fn decision(call: &Call, decision: &'static str) {
    tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, decision);
}

/// Transient store failures at completion time are retried a few times within
/// the lease: losing a result that was produced costs a re-run later.
async fn complete_with_retry(
    store: &dyn Store,
    id: &RecordId,
    lease: &Lease,
    outcome: &Outcome,
    ttl: Duration,
) -> Result<(), StoreError> {
    let mut pause = Duration::from_millis(20);
    let mut attempt = 0;
    loop {
        match store.complete(id, lease, outcome, ttl).await {
            Err(e) if e.is_transient() && attempt < 3 && pause < lease.duration => {
                attempt += 1;
                tokio::time::sleep(pause).await;
                pause *= 4;
            }
            other => return other,
        }
    }
}

async fn renew_loop(
    store: Arc<dyn Store>,
    id: RecordId,
    mut lease: Lease,
    every: Duration,
    lost: Arc<AtomicBool>,
    scope: Scope,
) {
    // The caller has already waited `every` when it starts this task.
    loop {
        match store.renew(&id, &lease, lease.duration).await {
            Ok(renewed) => {
                lease = renewed;
                tracing::trace!(target: "idem", scope = %scope, record = %id, decision = "renewed");
            }
            Err(e) if e.is_lease_lost() => {
                lost.store(true, Ordering::SeqCst);
                tracing::warn!(target: "idem", scope = %scope, record = %id, decision = "lease_lost", "renewal found the claim lost; the operation's result will not be recorded");
                return;
            }
            Err(e) => {
                // Try again well before the lease runs out: the next regular
                // renewal could come too late after a store blip.
                tracing::warn!(target: "idem", scope = %scope, record = %id, error = %e, decision = "renew_failed", "lease renewal failed; trying again");
                tokio::time::sleep((every / 4).max(MIN_DURATION)).await;
                continue;
            }
        }
        tokio::time::sleep(every).await;
    }
}

enum GuardState {
    Running,
    Completing(Outcome),
    /// Nothing took effect and the claim is being released.
    Releasing,
    Done,
}

/// Finishes recording the outcome if the operation's future is dropped while
/// it is being recorded, and keeps the claim (until its lease ends) if it is
/// dropped or panics while the operation runs.
struct Guard<'a> {
    store: Arc<dyn Store>,
    id: RecordId,
    lease: Lease,
    ttl: Duration,
    state: GuardState,
    renewal: Option<JoinHandle<()>>,
    scope: &'a Scope,
}

impl Guard<'_> {
    /// Records the outcome held in `Completing` state. The guard is done after
    /// a success or a lost lease; after a transient failure it keeps the
    /// outcome for [`take_outcome`](Self::take_outcome).
    async fn complete(&mut self) -> Result<(), StoreError> {
        let GuardState::Completing(outcome) = &self.state else {
            return Ok(());
        };
        let result =
            complete_with_retry(&*self.store, &self.id, &self.lease, outcome, self.ttl).await;
        if !matches!(&result, Err(e) if e.is_transient()) {
            self.state = GuardState::Done;
        }
        result
    }

    /// The outcome still to be recorded, if any; the guard is done after.
    fn take_outcome(&mut self) -> Option<Outcome> {
        match std::mem::replace(&mut self.state, GuardState::Done) {
            GuardState::Completing(outcome) => Some(outcome),
            _ => None,
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        match std::mem::replace(&mut self.state, GuardState::Done) {
            GuardState::Done => {}
            // Nothing took effect and the caller went away while the claim
            // was being released: finish the release in the background, so
            // that the key is not left claimed for the lease.
            GuardState::Releasing => {
                settle_later(
                    Arc::clone(&self.store),
                    self.id,
                    self.lease,
                    Settle::Release,
                    self.scope.clone(),
                    Duration::ZERO,
                );
            }
            // The operation ran and its caller went away while its result
            // was being recorded: keep trying in the background while the
            // lease lasts, as after an outage at completion, so that a
            // retry replays the result instead of running it again.
            GuardState::Completing(outcome) => {
                tracing::debug!(target: "idem", scope = %self.scope, record = %self.id, decision = "completing_after_cancellation");
                settle_later(
                    Arc::clone(&self.store),
                    self.id,
                    self.lease,
                    Settle::Complete {
                        outcome,
                        ttl: self.ttl,
                    },
                    self.scope.clone(),
                    Duration::ZERO,
                );
            }
            // Dropped or panicked while the operation ran: whatever it did
            // may have taken effect, so the claim is not released. It ends
            // with its lease (no renewal keeps it any longer), and a retry
            // meanwhile is told the operation is in flight.
            GuardState::Running => {
                tracing::warn!(target: "idem", scope = %self.scope, record = %self.id, token = self.lease.token.0, decision = "outcome_unknown", "the operation was dropped or panicked while it ran; its outcome is unknown, so its claim is kept until the lease ends");
            }
        }
    }
}
