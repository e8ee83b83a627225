//! `StoreFuture`: a store's answer that owns what it needs, already known
//! or still on its way.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::store_error::StoreError;

type Boxed<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

/// The answer of [`Store::begin`](crate::Store::begin) or
/// [`Store::complete`](crate::Store::complete): a future that borrows
/// nothing, so that the engine can finish it in the background when its
/// caller goes away.
///
/// A store that answers without waiting (the memory store, or a replay
/// from a cache) gives it [`ready`](Self::ready), which allocates nothing;
/// one that waits on the network gives it [`boxed`](Self::boxed).
///
/// The store's step may be taken when the future is made (a ready answer)
/// or only once it is polled (a boxed one). A caller that drops it must
/// treat what it asked for as possibly done: the engine drives a dropped
/// `begin` to its end and releases a claim it granted.
#[must_use = "a store's answer says whether the call took effect"]
pub struct StoreFuture<T>(State<T>);

enum State<T> {
    Ready(Option<Result<T, StoreError>>),
    Waiting(Boxed<T>),
}

impl<T> StoreFuture<T> {
    /// An answer already known.
    pub fn ready(answer: Result<T, StoreError>) -> Self {
        Self(State::Ready(Some(answer)))
    }

    /// An answer still to come from `future`.
    pub fn boxed(future: impl Future<Output = Result<T, StoreError>> + Send + 'static) -> Self {
        Self(State::Waiting(Box::pin(future)))
    }

    /// Whether the answer is known without waiting.
    pub fn is_ready(&self) -> bool {
        matches!(self.0, State::Ready(Some(_)))
    }
}

// The answer is never pinned in place: it is only moved out, whole.
impl<T> Unpin for StoreFuture<T> {}

impl<T> Future for StoreFuture<T> {
    type Output = Result<T, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            State::Ready(answer) => Poll::Ready(answer.take().unwrap_or_else(|| {
                Err(StoreError::corrupt(
                    "a store's answer was polled again after it was given",
                ))
            })),
            State::Waiting(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for StoreFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            State::Ready(Some(_)) => "StoreFuture::Ready",
            State::Ready(None) => "StoreFuture::Taken",
            State::Waiting(_) => "StoreFuture::Waiting",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_ready_answer_is_given_once_and_a_boxed_one_when_it_comes() {
        let mut ready = StoreFuture::ready(Ok(7));
        assert!(ready.is_ready());
        assert_eq!((&mut ready).await.expect("ready"), 7);
        let again = (&mut ready).await;
        assert!(
            again.is_err_and(|e| e.to_string().contains("polled again")),
            "a second poll says what went wrong"
        );
        let boxed = StoreFuture::boxed(async {
            tokio::task::yield_now().await;
            Ok("later")
        });
        assert!(!boxed.is_ready());
        assert_eq!(boxed.await.expect("boxed"), "later");
    }
}
