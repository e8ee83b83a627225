//! `Failure`: whether an operation's error is recorded or releases the claim.

use std::convert::Infallible;
use std::fmt;

use serde::{Deserialize, Serialize};

#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say whether a failure is final or transient",
    label = "implement `idem_core::Failure` for this error type",
    note = "final failures (\"insufficient funds\") are recorded and replayed; transient ones (\"timeout\") release the claim so that a retry runs again"
)]
/// Says whether an operation's error is final (recorded and replayed to every
/// retry, like "insufficient funds") or transient (the claim is released so a
/// retry runs the operation again, like "provider timed out").
pub trait Failure {
    /// `true` if the failure is recorded, `false` if the claim is released.
    fn is_final(&self) -> bool;
}

impl Failure for Infallible {
    fn is_final(&self) -> bool {
        match *self {}
    }
}

/// The error type of an operation that cannot fail, for [`Engine::run`](crate::Engine::run)
/// (which needs a serializable error type, which `Infallible` is not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Never {}

impl Failure for Never {
    fn is_final(&self) -> bool {
        match *self {}
    }
}

impl fmt::Display for Never {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}

impl std::error::Error for Never {}
