//! `Completion` and `Execution`: what a low-level operation asks of the
//! engine, and what the engine answers.

use crate::store::Outcome;

/// What a low-level operation (see [`Engine::execute`](crate::Engine::execute)) asks the engine to do
/// with its claim. An operation that settled its claim itself
/// ([`Claim::commit`](crate::Claim::commit)) has that honoured instead: only
/// the value is taken from here.
#[derive(Debug)]
pub enum Completion<T> {
    /// Record `outcome` and return `value` to the caller.
    Record {
        /// What this caller gets.
        value: T,
        /// What every retry gets.
        outcome: Outcome,
    },
    /// Record nothing and give the claim up, so a retry runs again. Only for
    /// an operation known to have taken no effect (see
    /// [When a claim is given up](crate::Engine#when-a-claim-is-given-up)).
    Release(T),
    /// Record nothing and keep the claim until its lease ends: the operation
    /// may have taken effect, but it has no outcome to record. Retries are
    /// told it is in flight until then.
    Keep(T),
}

impl<T> Completion<T> {
    /// What the caller gets, whatever is done with the claim.
    pub(crate) fn into_value(self) -> T {
        match self {
            Self::Record { value, .. } | Self::Release(value) | Self::Keep(value) => value,
        }
    }
}

/// The result of [`Engine::execute`](crate::Engine::execute).
#[derive(Debug)]
pub enum Execution<T> {
    /// The operation ran now.
    Executed(T),
    /// The operation had run; here is its recorded outcome for the caller to decode.
    Replayed(Outcome),
}
