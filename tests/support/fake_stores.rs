//! Stores that fail the way real ones do: one whose backend is down, and,
//! through the one forwarding wrapper (`Hooked`), one whose begins are
//! slow and one whose renewals never get through.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::store::{async_trait, Begin, StoreFuture};
use idem_core::{Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store, StoreError};

use crate::hooked_store::{Hooked, Hooks, Transition};

/// A store whose backend cannot be reached: every call fails as a real
/// client's would on a refused connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct DownStore;

fn refused(what: &str) -> StoreError {
    StoreError::unavailable(
        format!("{what}: cannot reach the store"),
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
    )
}

#[async_trait]
impl Store for DownStore {
    fn begin(&self, _: &RecordId, _: &Fingerprint, _: Duration) -> StoreFuture<Begin> {
        StoreFuture::ready(Err(refused("begin")))
    }
    fn complete(&self, _: &RecordId, _: &Lease, _: &Outcome, _: Duration) -> StoreFuture<()> {
        StoreFuture::ready(Err(refused("complete")))
    }
    async fn release(&self, _: &RecordId, _: &Lease) -> Result<(), StoreError> {
        Err(refused("release"))
    }
    async fn renew(&self, _: &RecordId, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
        Err(refused("renew"))
    }
    fn wakes(&self) -> bool {
        false
    }
    async fn changed(&self, _: &RecordId, within: Duration) -> Option<RecordInfo> {
        tokio::time::sleep(within).await;
        None
    }
    fn name(&self) -> &'static str {
        "down"
    }
    async fn inspect(&self, _: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        Err(refused("inspect"))
    }
    async fn remove(&self, _: &RecordId, _: bool) -> Result<Removal, StoreError> {
        Err(refused("remove"))
    }
}

/// Hooks that count begins and answer each of them `by` late (a store
/// across a slow network, or under load, so that a client can give up
/// while its claim is being taken).
#[derive(Debug, Default)]
pub struct LateBegins {
    by: Duration,
    begins: AtomicUsize,
    answered: AtomicUsize,
}

impl Hooks for LateBegins {
    async fn around<T: Send>(
        &self,
        transition: Transition<'_>,
        forward: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        if !matches!(transition, Transition::Begin(_)) {
            return forward.await;
        }
        self.begins.fetch_add(1, Ordering::SeqCst);
        let begun = forward.await;
        if !self.by.is_zero() {
            tokio::time::sleep(self.by).await;
        }
        self.answered.fetch_add(1, Ordering::SeqCst);
        begun
    }
}

/// A store whose begins are counted and answered late; everything else
/// goes straight to the store underneath.
pub type SlowBegin = Hooked<LateBegins>;

impl Hooked<LateBegins> {
    /// `inner`, its begins answered `by` late (`Duration::ZERO`: only
    /// counted).
    pub fn slow_begins(inner: impl Store, by: Duration) -> Self {
        let hooks = LateBegins {
            by,
            begins: AtomicUsize::new(0),
            answered: AtomicUsize::new(0),
        };
        Hooked::new(Arc::new(inner), hooks)
    }

    /// How many begins were asked.
    pub fn begins(&self) -> usize {
        self.hooks().begins.load(Ordering::SeqCst)
    }

    /// How many begins were answered (to callers still there or not).
    pub fn answered(&self) -> usize {
        self.hooks().answered.load(Ordering::SeqCst)
    }
}

/// Hooks under which renewals never get through, for a holder that stalls:
/// a frozen process, a partition from the store.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRenewals;

impl Hooks for NoRenewals {
    async fn around<T: Send>(
        &self,
        transition: Transition<'_>,
        forward: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        match transition {
            Transition::Renew(..) => Err(refused("renewal (the holder is stalled)")),
            _ => forward.await,
        }
    }
}

/// A store whose renewals never get through: its holder's lease ends while
/// it works, and another attempt can take the record over; everything
/// else goes to the store underneath.
pub type RenewalsFail = Hooked<NoRenewals>;

impl Hooked<NoRenewals> {
    /// `inner`, its renewals cut off.
    pub fn renewals_fail(inner: Arc<dyn Store>) -> Self {
        Hooked::new(inner, NoRenewals)
    }
}
