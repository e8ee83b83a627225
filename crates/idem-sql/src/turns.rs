//! Writers taking turns in this process. A database that runs one writer at
//! a time (SQLite) makes every other writer wait in its busy handler, which
//! sleeps in growing steps (up to 100 ms) and so answers late long after
//! the lock is free: 32 debits at once waited up to 0.7 s each. Taking
//! turns on an async semaphore first queues this process's writers in
//! order and wakes each the moment the one before it is done; the busy
//! handler is left to other processes' writers.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a writer waits for its turn before it gives up as transient:
/// SQLite's default busy timeout, the same wait a writer of another process
/// gets.
pub(crate) const TURN_WAIT: Duration = Duration::from_secs(5);

/// A store's turns: none for a database whose writers run side by side.
#[derive(Clone, Default)]
pub(crate) struct Turns(Option<Arc<Semaphore>>);

/// Waiting for a turn took longer than [`TURN_WAIT`].
#[derive(Debug)]
pub(crate) struct TurnTimedOut;

impl Turns {
    /// One writer at a time.
    pub(crate) fn one_at_a_time() -> Self {
        Self(Some(Arc::new(Semaphore::new(1))))
    }

    /// Waits for this writer's turn; held until the permit is dropped.
    pub(crate) async fn take(&self) -> Result<Option<OwnedSemaphorePermit>, TurnTimedOut> {
        let Some(turns) = &self.0 else {
            return Ok(None);
        };
        match tokio::time::timeout(TURN_WAIT, Arc::clone(turns).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            // Closed never happens (the semaphore is never closed); timed out.
            _ => Err(TurnTimedOut),
        }
    }
}
