//! `Hooked`: one store wrapper for the tests, forwarding every call to a
//! real store, with a test's [`Hooks`] around each transition: a store
//! across a slow network, one whose renewals never get through, one that
//! drops answers, one that counts what it was asked.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use idem_core::store::{async_trait, Begin, StoreFuture};
use idem_core::{Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store, StoreError};

/// A transition a [`Hooked`] store forwards, as its hooks see it.
#[derive(Clone, Copy, Debug)]
pub enum Transition<'a> {
    /// `begin` for a record.
    Begin(&'a RecordId),
    /// `complete` of a record under a lease.
    Complete(&'a RecordId, &'a Lease),
    /// `release` of a record under a lease.
    Release(&'a RecordId, &'a Lease),
    /// `renew` of a record under a lease.
    Renew(&'a RecordId, &'a Lease),
}

/// What a test does around each transition its store forwards. `forward`
/// is the call to the real store, not yet sent: await it to send it (and
/// do something before or after), or answer without it (the store never
/// sees the call). By default every call is forwarded as it is.
pub trait Hooks: Send + Sync + 'static {
    /// The answer to `transition`, from `forward` or instead of it.
    fn around<T: Send>(
        &self,
        transition: Transition<'_>,
        forward: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        let _ = transition;
        forward
    }

    /// Whether the store underneath may wake waiting duplicates; `false`
    /// makes it a store that cannot (the engine polls it).
    fn wakes(&self) -> bool {
        true
    }
}

/// A store that forwards every call to `inner`, with `hooks` around each
/// transition (`begin`, `complete`, `release`, `renew`); what it reads
/// (`inspect`, `changed`) and removes goes straight to `inner`.
pub struct Hooked<H> {
    inner: Arc<dyn Store>,
    /// Shared with the answers to `begin` and `complete`, which borrow
    /// nothing.
    hooks: Arc<H>,
}

impl<H> Clone for Hooked<H> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            hooks: Arc::clone(&self.hooks),
        }
    }
}

impl<H: Hooks> Hooked<H> {
    /// `inner`, with `hooks` around its transitions.
    pub fn new(inner: Arc<dyn Store>, hooks: H) -> Self {
        Self {
            inner,
            hooks: Arc::new(hooks),
        }
    }

    /// The hooks (what they counted).
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    /// The store underneath, without the hooks.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }
}

#[async_trait]
impl<H: Hooks> Store for Hooked<H> {
    // The call is made only when the hooks forward it: a store that answers
    // at once takes its step when asked, and a hook may delay it or answer
    // instead.
    fn begin(&self, id: &RecordId, fp: &Fingerprint, lease: Duration) -> StoreFuture<Begin> {
        let (inner, hooks) = (Arc::clone(&self.inner), Arc::clone(&self.hooks));
        let (id, fp) = (*id, *fp);
        StoreFuture::boxed(async move {
            let forward = async { inner.begin(&id, &fp, lease).await };
            hooks.around(Transition::Begin(&id), forward).await
        })
    }
    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        let (inner, hooks) = (Arc::clone(&self.inner), Arc::clone(&self.hooks));
        let (id, lease, outcome) = (*id, *lease, outcome.clone());
        StoreFuture::boxed(async move {
            let forward = async { inner.complete(&id, &lease, &outcome, ttl).await };
            hooks
                .around(Transition::Complete(&id, &lease), forward)
                .await
        })
    }
    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        let forward = self.inner.release(id, lease);
        self.hooks
            .around(Transition::Release(id, lease), forward)
            .await
    }
    async fn renew(&self, id: &RecordId, lease: &Lease, by: Duration) -> Result<Lease, StoreError> {
        let forward = self.inner.renew(id, lease, by);
        self.hooks
            .around(Transition::Renew(id, lease), forward)
            .await
    }
    fn wakes(&self) -> bool {
        self.hooks.wakes() && self.inner.wakes()
    }
    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        if !self.hooks.wakes() {
            // As a store that cannot wake: the wait is the poll's pause.
            tokio::time::sleep(within).await;
            return None;
        }
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
