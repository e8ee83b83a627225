//! `Detached`: a future driven in place that, if dropped before it is done,
//! finishes on a task of its own instead of being cancelled, and tells the
//! future so (`CallerGone`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Drives `F` in the caller's task (no task spawned on the common path); if
/// the caller drops it before it completes (the server drops a connection's
/// future when the client hangs up), the rest of `F` is handed to `spawn`
/// and runs to its end, its output discarded.
///
/// This is how an adapter keeps a handler that already holds a claim from
/// being cancelled half-way: a dropped future is an unknown outcome, and the
/// only way to know it is to let it finish. Each adapter passes the spawn of
/// its runtime (`tokio::spawn` for axum and tonic, `actix_web::rt::spawn`
/// for actix-web's thread-local futures).
///
/// The future is made with a [`CallerGone`] that turns true when it is
/// handed on, so that work that has not started yet (the handler, while the
/// claim is still being taken) need not start for nobody: the adapters
/// release such a claim instead of running the handler.
pub struct Detached<F: Future + 'static> {
    /// `None` once done, or after a poll that panicked (a future that
    /// panicked must not be polled again).
    future: Option<Pin<Box<F>>>,
    spawn: fn(Pin<Box<F>>),
    gone: CallerGone,
}

impl<F: Future + 'static> Detached<F> {
    /// Drives the future that `make` returns, handing it to `spawn` if
    /// dropped before it is done; `make` gets the flag that says so.
    pub fn new(make: impl FnOnce(CallerGone) -> F, spawn: fn(Pin<Box<F>>)) -> Self {
        let gone = CallerGone::default();
        Self {
            future: Some(Box::pin(make(gone.clone()))),
            spawn,
            gone,
        }
    }
}

/// Whether the caller of a [`Detached`] future went away (the client hung
/// up, or its deadline passed) and the future now runs for nobody.
#[derive(Clone, Debug, Default)]
pub struct CallerGone(Arc<AtomicBool>);

impl CallerGone {
    /// True once the caller went away.
    pub fn is_gone(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Asked just before the handler would start, under its claim: true
    /// (and logged) if the caller went away, in which case the adapter
    /// releases the claim rather than run the handler for nobody.
    pub fn before_start(&self) -> bool {
        let gone = self.is_gone();
        if gone {
            tracing::debug!(target: "idem", decision = idem_core::Decision::Released.as_str(), "the caller went away before the handler started; nothing ran and the claim is released");
        }
        gone
    }
}

impl<F: Future + 'static> Future for Detached<F> {
    /// `None` if the future panicked.
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Taken out while it is polled: if the poll panics, the future is
        // dropped during the unwind and not handed on.
        let Some(mut future) = self.future.take() else {
            return Poll::Ready(None);
        };
        // A panic is caught here, and the future dropped: the caller gets
        // `None`, and answers for a handler whose outcome is unknown.
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Some(output)),
            Ok(Poll::Pending) => {
                self.future = Some(future);
                Poll::Pending
            }
            Err(_) => Poll::Ready(None),
        }
    }
}

impl<F: Future + 'static> Drop for Detached<F> {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            self.gone.0.store(true, Ordering::Release);
            (self.spawn)(future);
        }
    }
}

/// The `spawn` for `Send` futures on a tokio runtime (axum, tonic): the
/// rest of the future runs on a task of its own. Outside a runtime it can
/// only be dropped, and its claim is kept until the lease ends.
pub fn spawn_on_tokio<F>(future: Pin<Box<F>>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            tracing::debug!(target: "idem", decision = idem_core::Decision::Detached.as_str(), "the caller went away; the idempotent part finishes on its own task");
            drop(handle.spawn(future));
        }
        Err(_) => {
            tracing::warn!(target: "idem", decision = idem_core::Decision::Abandoned.as_str(), "the caller went away outside a tokio runtime; the operation is dropped mid-way and its claim kept until the lease ends");
        }
    }
}
