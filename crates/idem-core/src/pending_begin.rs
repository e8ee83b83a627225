//! A claim on its way: `begin` sent to the store, its answer not yet read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::call::Call;
use crate::decision::Decision;
use crate::grant::Grant;
use crate::settle::{settle_later, Settle};
use crate::store::{Begin, Lease, Store, StoreError};
use crate::store_future::StoreFuture;

/// A `begin` in flight. Awaiting it gives the store's answer. If it is
/// dropped before that (its caller went away), the answer is still awaited
/// in the background, and a claim it grants is released at once: nothing ran
/// under it, so the key must not stay claimed for a whole lease.
pub(crate) struct PendingBegin<'a> {
    answer: Option<StoreFuture<Begin>>,
    store: &'a Arc<dyn Store>,
    call: &'a Call,
    lease_len: Duration,
    ttl: Duration,
}

impl<'a> PendingBegin<'a> {
    /// Sends `begin` for `call` through `store`, asking for a lease of
    /// `lease_len`, for a record to be kept `ttl`.
    pub(crate) fn send(
        store: &'a Arc<dyn Store>,
        call: &'a Call,
        lease_len: Duration,
        ttl: Duration,
    ) -> Self {
        Self {
            answer: Some(store.begin(&call.id, &call.fingerprint, lease_len)),
            store,
            call,
            lease_len,
            ttl,
        }
    }

    /// The claim granted under `lease`.
    pub(crate) fn granted(&self, lease: Lease) -> Grant {
        self.grant_under()(lease)
    }

    /// Makes the claim granted under a lease, owning what it needs (for a
    /// begin finished in the background).
    fn grant_under(&self) -> impl FnOnce(Lease) -> Grant + Send + 'static {
        let (store, id) = (Arc::clone(self.store), self.call.id);
        let (lease_len, ttl) = (self.lease_len, self.ttl);
        move |lease| Grant {
            store,
            id,
            lease,
            lease_len,
            ttl,
            entered: None,
        }
    }
}

impl Future for PendingBegin<'_> {
    type Output = Result<Begin, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(answer) = self.answer.as_mut() else {
            return Poll::Ready(Err(StoreError::corrupt("begin polled after its answer")));
        };
        let ready = Pin::new(answer).poll(cx);
        if ready.is_ready() {
            self.answer = None;
        }
        ready
    }
}

impl Drop for PendingBegin<'_> {
    fn drop(&mut self) {
        let Some(answer) = self.answer.take() else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(target: "idem", scope = %self.call.scope, record = %self.call.id, "a claim abandoned while being taken, outside a tokio runtime; if it landed, it ends with its lease");
            return;
        };
        let (id, scope, grant) = (self.call.id, self.call.scope.clone(), self.grant_under());
        handle.spawn(async move {
            match answer.await {
                Ok(Begin::Acquired(lease)) => {
                    tracing::debug!(target: "idem", scope = %scope, record = %id, token = lease.token.0, decision = Decision::ReleasingUnusedClaim.as_str(), "the caller went away while the claim was being taken; nothing ran under it, so it is released");
                    settle_later(grant(lease), Settle::Release, scope, Duration::ZERO);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(target: "idem", scope = %scope, record = %id, error = %e, "a begin whose caller went away failed; nothing was claimed, or the claim ends with its lease");
                }
            }
        });
    }
}
