//! `Detached`: a future driven in place that, if dropped before it is done,
//! finishes on a task of its own instead of being cancelled.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Drives `F` in the caller's task (no task spawned on the common path); if
/// the caller drops it before it completes (hyper drops a connection's
/// future when the client hangs up), the rest of `F` is handed to a new task
/// and runs to its end, its output discarded.
pub(crate) struct Detached<F: Future + Send + 'static>
where
    F::Output: Send + 'static,
{
    /// `None` once done, or after a poll that panicked (a future that
    /// panicked must not be polled again).
    future: Option<Pin<Box<F>>>,
}

impl<F: Future + Send + 'static> Detached<F>
where
    F::Output: Send + 'static,
{
    pub(crate) fn new(future: F) -> Self {
        Self {
            future: Some(Box::pin(future)),
        }
    }
}

impl<F: Future + Send + 'static> Future for Detached<F>
where
    F::Output: Send + 'static,
{
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Taken out while it is polled: if the poll panics, the future is
        // dropped during the unwind and not handed on.
        let Some(mut future) = self.future.take() else {
            return Poll::Ready(None);
        };
        match future.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending => {
                self.future = Some(future);
                Poll::Pending
            }
        }
    }
}

impl<F: Future + Send + 'static> Drop for Detached<F>
where
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        let Some(future) = self.future.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                tracing::debug!(target: "idem", decision = "detached", "the caller went away; the idempotent part finishes on its own task");
                drop(handle.spawn(future));
            }
            Err(_) => {
                tracing::warn!(target: "idem", decision = "outcome_unknown", "the caller went away outside a tokio runtime; the operation is dropped mid-way and its claim kept until the lease ends");
            }
        }
    }
}
