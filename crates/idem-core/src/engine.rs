//! `Engine`: runs operations at most once per key.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use crate::call::Call;
use crate::claim::Claim;
use crate::claimed::{Begun, Claimed};
use crate::completion::{Completion, Execution};
use crate::decision::Decision;
use crate::error::Error;
use crate::failure::Failure;
use crate::grant::Grant;
use crate::held::Held;
use crate::in_flight::{InFlight, OVERLOADED_RETRY_AFTER};
use crate::observe;
use crate::pending_begin::PendingBegin;
use crate::policy::{OnInFlight, Policy, MIN_DURATION};
use crate::ran::Ran;
use crate::result_codec::ResultCodec;
use crate::run_report::RunReport;
use crate::store::{Begin, Outcome, RecordInfo, RecordInfoState, Store};

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
/// lease ends ([`DEFAULT_LEASE`](crate::DEFAULT_LEASE), 10 seconds, unless the policy says
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
    /// The claimed work this engine (and its clones) runs, and its bound.
    in_flight: Arc<InFlight>,
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
            store: observe::timed(store),
            policy: Policy::default(),
            in_flight: Arc::default(),
        }
    }

    /// Runs at most `limit` calls at once in this process (this engine and
    /// its clones): a call past it is refused at once with
    /// [`Error::Overloaded`] (HTTP 503 with `Retry-After`), before the store
    /// is asked, instead of queueing without bound. A call counts from its
    /// claim until its result is recorded, whether or not its caller is
    /// still there; a duplicate waiting for its holder counts too.
    #[must_use]
    pub fn with_max_in_flight(mut self, limit: usize) -> Self {
        self.in_flight = Arc::new(InFlight::bounded(Some(limit.max(1))));
        self
    }

    /// The bound set with [`with_max_in_flight`](Self::with_max_in_flight).
    pub fn max_in_flight(&self) -> Option<usize> {
        self.in_flight.limit()
    }

    /// How many calls run now in this process under this engine and its
    /// clones (claimed and not yet settled, their callers gone or not).
    pub fn in_flight(&self) -> usize {
        self.in_flight.count()
    }

    /// Waits until no call runs under this engine in this process, at most
    /// `within`; whether none does. On shutdown, after the server stopped
    /// taking requests: work whose caller went away is still running, and
    /// a process that exits under it leaves its outcome unknown until its
    /// lease ends.
    pub async fn drained(&self, within: Duration) -> bool {
        self.in_flight.drained(within).await
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
        self.run_with(call, ResultCodec::serde(), op).await
    }

    /// [`run`](Self::run), and whether what it ran is recorded: for a
    /// caller that must not let go of its request before the outcome is
    /// stored (a queue consumer acknowledges its message only then). An
    /// operation that ran here and whose outcome is still being recorded in
    /// the background (the store went away) answers `recorded: false`.
    pub async fn run_reported<T, E, F, Fut>(&self, call: &Call, op: F) -> RunReport<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: Failure + Serialize + DeserializeOwned,
        F: FnOnce(Claim) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let codec = ResultCodec::serde();
        // The claim the operation ran under, if it ran here: it knows
        // whether its outcome was stored.
        let ran_under: Mutex<Option<Claim>> = Mutex::new(None);
        let result = self
            .run_with(call, codec, |claim| {
                *ran_under.lock().unwrap_or_else(PoisonError::into_inner) = Some(claim.clone());
                op(claim)
            })
            .await;
        let recorded = ran_under
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_none_or(Claim::is_recorded);
        RunReport { result, recorded }
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
        match self.acquire(call).await? {
            Acquire::Granted(grant) => run_held(Held::new(grant, call), op).await,
            Acquire::Replay(outcome) => Ok(Execution::Replayed(outcome)),
        }
    }

    /// The first step of [`execute`](Self::execute) on its own: the claim
    /// for `call`, or its recorded outcome if it had run (after waiting for
    /// a duplicate in flight, as the policy says). Run the operation under
    /// the claim with [`execute_claimed`](Self::execute_claimed), which may
    /// be elsewhere: an HTTP adapter takes the claim in the request's task
    /// and hands only a claimed call to a task that outlives its client, so
    /// that a replay or a refusal never pays for that.
    ///
    /// If the returned future is dropped while the claim is being taken, a
    /// claim that lands is released at once. A [`Claimed`] dropped without
    /// being run under is released too: nothing ran.
    ///
    /// # Errors
    ///
    /// As [`execute`](Self::execute) before its operation runs:
    /// [`Error::Mismatch`], [`Error::Expired`], [`Error::InFlight`], [`Error::Store`].
    pub async fn begin(&self, call: &Call) -> Result<Begun, Error> {
        Ok(match self.acquire(call).await? {
            Acquire::Granted(grant) => Begun::Claimed(Claimed::new(grant, call.scope.clone())),
            Acquire::Replay(outcome) => Begun::Replayed(outcome),
        })
    }

    /// The rest of [`execute`](Self::execute) once [`begin`](Self::begin)
    /// claimed `call`: runs `op` under `claimed` and settles the claim as
    /// its completion says, exactly as `execute` does from there.
    ///
    /// # Errors
    ///
    /// As [`execute`](Self::execute) once its operation runs, and
    /// [`Error::LeaseLost`] at once (the claim released) if `claimed` was
    /// taken for another call.
    pub async fn execute_claimed<T, F, Fut>(
        &self,
        call: &Call,
        claimed: Claimed,
        op: F,
    ) -> Result<Execution<T>, Error>
    where
        F: FnOnce(Claim) -> Fut,
        Fut: Future<Output = Completion<T>>,
    {
        if *claimed.record_id() != call.id {
            tracing::error!(target: "idem", scope = %call.scope, record = %call.id, claimed = %claimed.record_id(), "a claim was run under another call than the one it was taken for; it is released and nothing runs");
            return Err(Error::LeaseLost);
        }
        run_held(Held::new(claimed.disarm(), call), op).await
    }

    async fn acquire(&self, call: &Call) -> Result<Acquire, Error> {
        let Some(entered) = self.in_flight.enter() else {
            decision(call, Decision::Overloaded);
            return Err(Error::Overloaded {
                retry_after: OVERLOADED_RETRY_AFTER,
            });
        };
        let policy = call.overrides.apply(&self.policy);
        let (ttl, lease_len) = (policy.ttl_value(), policy.lease_value());
        let on_in_flight = policy.on_in_flight_value();
        // The wait for a duplicate in flight starts when the first one is
        // seen: most calls never see one, and read no clock for it.
        let mut started: Option<Instant> = None;
        let mut backoff = Duration::from_millis(5);
        loop {
            let mut pending = PendingBegin::send(&self.store, call, lease_len, ttl);
            match (&mut pending).await {
                Ok(Begin::Acquired(lease)) => {
                    tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, token = lease.token.0, decision = Decision::Acquired.as_str());
                    return Ok(Acquire::Granted(pending.granted(lease).counted(entered)));
                }
                Ok(Begin::Replay(outcome)) => {
                    decision(call, Decision::Replayed);
                    return Ok(Acquire::Replay(outcome));
                }
                Ok(Begin::Mismatch) => {
                    decision(call, Decision::Mismatch);
                    return Err(Error::Mismatch);
                }
                Ok(Begin::Expired) => {
                    decision(call, Decision::Expired);
                    return Err(Error::Expired);
                }
                Ok(Begin::InFlight { retry_after }) => {
                    let waited = started.get_or_insert_with(Instant::now).elapsed();
                    let left = match on_in_flight {
                        OnInFlight::Wait { max } if waited < max => max.saturating_sub(waited),
                        _ => {
                            decision(call, Decision::InFlight);
                            return Err(Error::InFlight { retry_after });
                        }
                    };
                    tracing::trace!(target: "idem", scope = %call.scope, record = %call.id, decision = Decision::Waiting.as_str());
                    // Until the first holder finishes (a store that wakes
                    // says when), its lease ends, or the wait is over.
                    let mut pause = left.min(retry_after.max(MIN_DURATION));
                    if !self.store.wakes() {
                        pause = pause.min(backoff);
                        backoff = (backoff * 2).min(Duration::from_millis(250));
                    }
                    // A store that read the record while waking its waiters
                    // answers a completed one here: no begin each.
                    if let Some(RecordInfo {
                        fingerprint,
                        state: RecordInfoState::Completed { outcome, .. },
                        ..
                    }) = self.store.changed(&call.id, pause).await
                    {
                        if fingerprint == call.fingerprint {
                            decision(call, Decision::Replayed);
                            return Ok(Acquire::Replay(outcome));
                        }
                    }
                }
                Err(e) => {
                    observe::decision(&call.operation, Decision::StoreError);
                    tracing::warn!(target: "idem", scope = %call.scope, record = %call.id, error = %e, decision = Decision::StoreError.as_str(), "the store did not answer; the operation does not run");
                    return Err(Error::Store(e));
                }
            }
        }
    }
}

/// Runs `op` under `held` and settles the claim as its completion says.
async fn run_held<T, F, Fut>(mut held: Held<'_>, op: F) -> Result<Execution<T>, Error>
where
    F: FnOnce(Claim) -> Fut,
    Fut: Future<Output = Completion<T>>,
{
    let completion = held.run(op).await;
    held.settle(completion).await
}

/// What a call's begin came to: a claim granted, or a recorded outcome.
enum Acquire {
    Granted(Grant),
    Replay(Outcome),
}

/// One decision about `call`, by one name in the log and the metric.
fn decision(call: &Call, decision: Decision) {
    tracing::debug!(target: "idem", scope = %call.scope, record = %call.id, decision = decision.as_str());
    observe::decision(&call.operation, decision);
}
