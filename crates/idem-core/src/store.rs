//! A store author's names: the `Store` trait that every backend
//! implements, the values it trades in, and the helpers every store shares
//! (the transition table is [`machine`](crate::machine), waking waiters
//! [`waiters`](crate::waiters), the conformance kit `testing`, feature
//! `testing`). An application needs only the names the crate's root also
//! exports; `StoreTransaction` is there too.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

pub use crate::fingerprint::Fingerprint;

pub use crate::digest::{Digest, DigestKind};
pub use crate::key::{RecordId, RecordKind};
pub use crate::purger::spawn_purger;
pub use crate::store_error::{StoreError, StoreErrorKind};
pub use crate::store_future::StoreFuture;
/// The `async_trait` attribute used by [`Store`], re-exported so that store
/// authors implement the trait with the same version.
pub use async_trait::async_trait;

/// The recorded result of an operation: opaque bytes that the caller encoded
/// (the engine's serde encoding, or a whole HTTP response) and that a replay
/// returns byte for byte.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Outcome(Bytes);

impl Outcome {
    /// Wraps encoded bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(Bytes::from(bytes.into()))
    }

    /// The bytes, shared rather than copied: a replay hands them on (an
    /// HTTP body, say) without copying the record.
    pub fn shared(&self) -> Bytes {
        self.0.clone()
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The encoded bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        Vec::from(self.0)
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the outcome has no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Outcome({} bytes)", self.0.len())
    }
}

impl From<Vec<u8>> for Outcome {
    fn from(v: Vec<u8>) -> Self {
        Self(Bytes::from(v))
    }
}

/// A fencing token: issued with each claim, strictly greater than every token
/// issued before it for the same record while the store's clock moves forward.
///
/// What is unique and what is ordered: tokens are ordered, and so unique,
/// **within one record** (one scope and key). They are **not** unique across
/// records: the first claims of two records taken in the same microsecond of
/// the store's clock get the same token. To name one claim among all records
/// (a debit id, say), pair the token with the record's address
/// ([`Claim::record_id`](crate::Claim::record_id)).
///
/// Pass it to downstream systems (a payment provider, a database row version)
/// so that they can refuse writes from a holder whose claim was taken over.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct FencingToken(pub u64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A claim on a record: the right to run its operation until the lease ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The fencing token of this claim.
    pub token: FencingToken,
    /// How long the claim lives, counted by the store's clock from when it was
    /// granted or last renewed.
    pub duration: Duration,
}

/// The answer to [`Store::begin`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begin {
    /// No live record existed (or the previous holder's lease ran out): the
    /// caller holds the claim and runs the operation.
    Acquired(Lease),
    /// Another caller holds a live claim for the same request.
    InFlight {
        /// Time left on that claim's lease, by the store's clock.
        retry_after: Duration,
    },
    /// The operation completed before; here is its recorded outcome.
    Replay(Outcome),
    /// The key is in use (in flight or completed) for a different request,
    /// or was, and its record's trace still says so.
    Mismatch,
    /// The operation completed before and its record has expired: its
    /// outcome is no longer kept, and a trace of it (its fingerprint, kept
    /// for the store's trace window) refuses to run it again.
    Expired,
}

/// What a live record says, for operators ([`Store::inspect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    /// The fingerprint of the request that made it.
    pub fingerprint: Fingerprint,
    /// The token of its latest claim.
    pub token: FencingToken,
    /// In flight or completed.
    pub state: RecordInfoState,
}

impl RecordInfo {
    /// A live record read from the columns a SQL store keeps: its
    /// fingerprint's 32 bytes, its token, whether it is completed, its
    /// outcome (a completed record's) and the microseconds it has left (its
    /// lease, or its lifetime once completed; negative counts as none).
    /// Fails, saying what is wrong, on a fingerprint of another length, a
    /// negative token or a completed record without outcome.
    pub fn from_columns(
        fingerprint: &[u8],
        token: i64,
        completed: bool,
        outcome: Option<Vec<u8>>,
        left_us: i64,
    ) -> Result<Self, &'static str> {
        let fingerprint: [u8; 32] = fingerprint
            .try_into()
            .map_err(|_| "the fingerprint is not 32 bytes")?;
        let token = u64::try_from(token).map_err(|_| "a negative token")?;
        let left = Duration::from_micros(u64::try_from(left_us).unwrap_or(0));
        let state = if completed {
            RecordInfoState::Completed {
                expires_in: left,
                outcome: Outcome::new(outcome.ok_or("a completed record has no outcome")?),
            }
        } else {
            RecordInfoState::InFlight { lease_left: left }
        };
        Ok(Self {
            fingerprint: Fingerprint::from_bytes(fingerprint),
            token: FencingToken(token),
            state,
        })
    }
}

/// The state of a live record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordInfoState {
    /// A holder runs the operation.
    InFlight {
        /// The time left on its lease.
        lease_left: Duration,
    },
    /// The outcome is recorded.
    Completed {
        /// The time until the record expires.
        expires_in: Duration,
        /// The recorded outcome.
        outcome: Outcome,
    },
}

/// What [`Store::remove`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The record was ended: the next request with its key runs again.
    Removed,
    /// Refused: the record is in flight and removal was not forced; nothing
    /// changed.
    RefusedInFlight,
    /// There is no live record: nothing changed.
    Absent,
}

/// Where idempotency records live.
///
/// Each method is one atomic step, following the transition table of
/// [`machine::step`](crate::machine::step): implementations keep its rules
/// exactly and prove it with the conformance kit (`idem_core::testing`, feature
/// `testing`). Expiry is decided by the store's own clock.
///
/// # Writing one
///
/// Each step is written once. `begin` and `complete`, on every request's
/// path, answer in a [`StoreFuture`] that borrows nothing: clone what the
/// step needs (a pool, a connection, the arguments) into it, or give the
/// answer at once. The other steps are `async` methods. None has a
/// default, so that a wrapper cannot forget to forward one and quietly
/// make the store it wraps poll instead of waking, or refuse operators: a
/// store that cannot do one says so in its own impl. A store that forwards
/// to another and counts the claims it grants:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use idem_core::store::{
///     async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store,
///     StoreError, StoreFuture,
/// };
///
/// struct Counted {
///     inner: Arc<dyn Store>,
///     granted: Arc<AtomicU64>,
/// }
///
/// #[async_trait]
/// impl Store for Counted {
///     fn begin(&self, id: &RecordId, fp: &Fingerprint, lease: Duration) -> StoreFuture<Begin> {
///         let answer = self.inner.begin(id, fp, lease);
///         let granted = Arc::clone(&self.granted);
///         StoreFuture::boxed(async move {
///             let begin = answer.await?;
///             if let Begin::Acquired(_) = begin {
///                 granted.fetch_add(1, Ordering::Relaxed);
///             }
///             Ok(begin)
///         })
///     }
///     fn complete(&self, id: &RecordId, lease: &Lease, out: &Outcome, ttl: Duration) -> StoreFuture<()> {
///         self.inner.complete(id, lease, out, ttl)
///     }
///     async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
///         self.inner.release(id, lease).await
///     }
///     async fn renew(&self, id: &RecordId, lease: &Lease, by: Duration) -> Result<Lease, StoreError> {
///         self.inner.renew(id, lease, by).await
///     }
///     fn wakes(&self) -> bool {
///         self.inner.wakes()
///     }
///     async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
///         self.inner.changed(id, within).await
///     }
///     fn name(&self) -> &'static str {
///         self.inner.name()
///     }
///     async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
///         self.inner.inspect(id).await
///     }
///     async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
///         self.inner.remove(id, force).await
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let granted = Arc::new(AtomicU64::new(0));
/// let inner: Arc<dyn Store> = Arc::new(idem_core::MemoryStore::new());
/// let store = Counted { inner, granted: Arc::clone(&granted) };
/// let key = idem_core::IdempotencyKey::parse("order-7").expect("a valid key");
/// let id = RecordId::new(&idem_core::Scope::new("orders"), &key);
/// let fp = Fingerprint::builder("order").bytes("item", b"book").finish();
/// let first = store.begin(&id, &fp, Duration::from_secs(30)).await;
/// assert!(matches!(first, Ok(Begin::Acquired(_))));
/// let again = store.begin(&id, &fp, Duration::from_secs(30)).await;
/// assert!(matches!(again, Ok(Begin::InFlight { .. })));
/// assert_eq!(granted.load(Ordering::Relaxed), 1);
/// # }
/// ```
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Claims the record for a request with `fingerprint`, or reports why not.
    ///
    /// The answer owns what it needs and borrows nothing (as a
    /// `tower::Service`'s future does): the engine finishes it in the
    /// background when its caller goes away, releasing a claim it grants,
    /// since nothing ran under it. A store that answers without waiting (from
    /// memory, or a cache) gives [`StoreFuture::ready`], which allocates
    /// nothing; one that waits clones what it needs (its pool or connection,
    /// the arguments) into [`StoreFuture::boxed`].
    fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin>;

    /// Records `outcome` for `ttl`, if `lease` is still the live claim.
    /// Completing again with the token that already completed the record
    /// succeeds and changes nothing (the first outcome stays).
    ///
    /// Like [`begin`](Self::begin), the answer borrows nothing (an
    /// [`Outcome`] is shared, not copied, when cloned into it).
    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()>;

    /// Gives the claim up without recording anything, so that a retry runs the
    /// operation again.
    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError>;

    /// Extends a live claim to `duration` from now by the store's clock.
    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError>;

    /// Whether [`changed`](Self::changed) is woken when a record is
    /// completed, released or removed. If not (`false`), the engine polls: a
    /// duplicate that waits (`OnInFlight::Wait`) calls `changed` with short,
    /// growing pauses instead of waiting for the whole lease.
    fn wakes(&self) -> bool;

    /// Waits until the record `id` may have changed (completed, released or
    /// removed), or `within` has passed. A store that read the record while
    /// waking its waiters returns what it read, so that they need not each
    /// ask again (a completed record answers them all). A store that cannot
    /// wake (its `wakes` is `false`) sleeps `within` and returns `None`.
    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo>;

    /// The store's name in metrics (`memory`, `redis`, `postgres`).
    fn name(&self) -> &'static str;

    /// Looks a live record up, for operators (support, debugging); `None`
    /// if there is none. Not on the request path. A store that cannot
    /// answers [`StoreError::unsupported`].
    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError>;

    /// Ends a live record, so that the next request with its key runs
    /// again. An in-flight record is refused unless `force` (its holder may
    /// still be running the operation: a retry would run it twice). The
    /// record's token is kept, so a holder fenced off by a later claim stays
    /// fenced. A store that cannot answers [`StoreError::unsupported`].
    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError>;
}
