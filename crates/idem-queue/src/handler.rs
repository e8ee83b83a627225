//! `Handler`: the user's code for one message, and `handler_fn` to write
//! one as a closure.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;

use idem_core::{Claim, Failure};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Handles one message's input under its claim. The result is recorded:
/// `Ok` and final failures are replayed to every later delivery of the
/// message; a transient failure releases the claim, and the message is
/// delivered again after a backoff.
///
/// An effect kept in the same store as idem's records can be committed
/// with the record ([`Claim::commit`]), so that a consumer frozen past its
/// lease writes nothing when it wakes; an effect elsewhere should be given
/// the claim's [fencing token](Claim::fencing_token) or
/// [downstream key](Claim::downstream_key).
pub trait Handler: Send + Sync + 'static {
    /// The message's payload, read from JSON.
    type Input: DeserializeOwned + Send + 'static;
    /// What the handler returns, recorded and replayed.
    type Output: Serialize + DeserializeOwned + Send + 'static;
    /// Its failures: [`Failure::is_final`] says which are recorded.
    type Error: Failure + Serialize + DeserializeOwned + Display + Send + 'static;

    /// Handles `input` under `claim`.
    fn handle(
        &self,
        input: Self::Input,
        claim: Claim,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// A [`Handler`] written as a closure `|input: T, claim: Claim| async { .. }`.
pub fn handler_fn<T, F>(f: F) -> HandlerFn<T, F> {
    HandlerFn {
        f,
        input: PhantomData,
    }
}

/// See [`handler_fn`].
pub struct HandlerFn<T, F> {
    f: F,
    input: PhantomData<fn(T)>,
}

impl<T, F, Fut, R, E> Handler for HandlerFn<T, F>
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(T, Claim) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send,
    R: Serialize + DeserializeOwned + Send + 'static,
    E: Failure + Serialize + DeserializeOwned + Display + Send + 'static,
{
    type Input = T;
    type Output = R;
    type Error = E;

    fn handle(&self, input: T, claim: Claim) -> impl Future<Output = Result<R, E>> + Send {
        (self.f)(input, claim)
    }
}
