//! An adapter author's names (HTTP and gRPC layers, queue consumers): a
//! claim taken in one place and run under in another ([`Engine::begin`]
//! answers a [`Begun`], [`Engine::execute_claimed`] runs a [`Claimed`]);
//! [`Engine::execute`] with a [`Completion`], answered by an
//! [`Execution`]; and batches of calls ([`in_batch`]).

#[cfg(doc)]
use crate::engine::Engine;

pub use crate::batch::{in_batch, is_in_batch};
pub use crate::claimed::{Begun, Claimed};
pub use crate::completion::{Completion, Execution};
