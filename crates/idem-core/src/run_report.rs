//! `RunReport`: what [`Engine::run_reported`](crate::Engine::run_reported)
//! answers: the call's result, and whether what it ran is recorded.

use crate::error::Error;
use crate::ran::Ran;

/// What an engine call answered, and whether the outcome it ran is stored.
#[derive(Debug)]
#[non_exhaustive]
pub struct RunReport<T, E> {
    /// The answer, as [`Engine::run`](crate::Engine::run) gives it.
    pub result: Result<Ran<T>, Error<E>>,
    /// Whether retries will be answered from the store: true for a replay
    /// and for an outcome recorded by this call (by the engine, or with
    /// the operation's writes by [`Claim::commit`](crate::Claim::commit));
    /// false while an outcome that ran here is still being recorded in the
    /// background, or could not be. Meaningless when nothing ran.
    pub recorded: bool,
}
