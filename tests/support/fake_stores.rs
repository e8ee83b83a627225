//! Stores that fail the way real ones do: one whose backend is down, one
//! whose begins are slow, one whose renewals never get through.

use std::time::Duration;

use idem_core::{
    async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store,
    StoreError,
};

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
    async fn begin(&self, _: &RecordId, _: &Fingerprint, _: Duration) -> Result<Begin, StoreError> {
        Err(refused("begin"))
    }
    async fn complete(
        &self,
        _: &RecordId,
        _: &Lease,
        _: &Outcome,
        _: Duration,
    ) -> Result<(), StoreError> {
        Err(refused("complete"))
    }
    async fn release(&self, _: &RecordId, _: &Lease) -> Result<(), StoreError> {
        Err(refused("release"))
    }
    async fn renew(&self, _: &RecordId, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
        Err(refused("renew"))
    }
}

/// A store that counts its begins and can answer each of them late (a store
/// across a slow network, or under load, so that a client can give up while
/// its claim is being taken); everything else goes straight to `inner`.
pub struct SlowBegin<S> {
    inner: S,
    by: Duration,
    begins: std::sync::atomic::AtomicUsize,
}

impl<S> SlowBegin<S> {
    /// Begins answer `by` late (`Duration::ZERO`: only counted).
    pub fn new(inner: S, by: Duration) -> Self {
        Self {
            inner,
            by,
            begins: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// How many begins were asked.
    pub fn begins(&self) -> usize {
        self.begins.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait]
impl<S: Store> Store for SlowBegin<S> {
    async fn begin(
        &self,
        id: &RecordId,
        fp: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        self.begins
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let begun = self.inner.begin(id, fp, lease).await;
        if !self.by.is_zero() {
            tokio::time::sleep(self.by).await;
        }
        begun
    }
    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.inner.complete(id, lease, outcome, ttl).await
    }
    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(id, lease).await
    }
    async fn renew(&self, id: &RecordId, lease: &Lease, by: Duration) -> Result<Lease, StoreError> {
        self.inner.renew(id, lease, by).await
    }
    fn wakes(&self) -> bool {
        self.inner.wakes()
    }
    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        self.inner.changed(id, within).await
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        self.inner.inspect(id).await
    }
    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        self.inner.remove(id, force).await
    }
}

/// A store whose renewals never get through, for a holder that stalls: a
/// frozen process, a partition from the store. Its lease ends while it
/// works, and another attempt can take the record over; everything else
/// goes to `inner`.
pub struct RenewalsFail(pub std::sync::Arc<dyn Store>);

#[async_trait]
impl Store for RenewalsFail {
    async fn begin(
        &self,
        id: &RecordId,
        fp: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        self.0.begin(id, fp, lease).await
    }
    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.0.complete(id, lease, outcome, ttl).await
    }
    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        self.0.release(id, lease).await
    }
    async fn renew(&self, _: &RecordId, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
        Err(refused("renewal (the holder is stalled)"))
    }
    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        self.0.remove(id, force).await
    }
}
