//! `Verdict`: what happened to a delivery, and what the broker is told.

use std::fmt;
use std::time::Duration;

/// What the broker is told to do with a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Acknowledge: the outcome is recorded (or the message can never run),
    /// and every later delivery of it would be answered from the record.
    Ack,
    /// Do not acknowledge; deliver again after `after` (never at once).
    Redeliver {
        /// How long to wait.
        after: Duration,
    },
    /// Move the message to the dead letters with `reason`, then acknowledge
    /// it: it must never run (its key was reused for another payload, it is
    /// malformed) or it failed too many times.
    DeadLetter {
        /// Why, for whoever reads the dead letters.
        reason: String,
    },
}

/// What happened to a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled {
    /// The handler ran now and its result is recorded.
    Executed,
    /// The message had taken effect before; its record answered.
    Replayed,
    /// The handler failed with a final failure, recorded (now or before).
    FailedFinal(String),
    /// The handler failed transiently; nothing took effect and its claim
    /// was released.
    FailedTransient(String),
    /// The handler ran, but its result is not stored yet (the store went
    /// away after the effect): redelivered until a delivery finds it.
    RecordPending,
    /// Another consumer holds the message's claim and may still be running
    /// it, or may die: this delivery waits for it.
    InFlight,
    /// The key was used before for another payload.
    KeyReused,
    /// The message took effect before, and its record has expired since: a
    /// trace of it refused to run it again (a redelivery, or a replay of the
    /// stream, later than the record's lifetime).
    Expired,
    /// The store could not be reached; nothing ran.
    StoreUnavailable(String),
    /// The message cannot be run: no key, not JSON, not the handler's input.
    Malformed(String),
    /// A transient failure on the last delivery allowed.
    Poisoned(String),
    /// The handler panicked, or its claim was lost while it ran: whether it
    /// took effect is unknown, and its claim is kept to its lease.
    Unknown(String),
}

/// A delivery's outcome and the action that follows from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// What happened.
    pub handled: Handled,
    /// What the broker is told.
    pub action: Action,
}

impl Verdict {
    /// Whether the message is done with (acknowledged, or dead-lettered).
    pub fn is_settled(&self) -> bool {
        !matches!(self.action, Action::Redeliver { .. })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.action {
            Action::Ack => write!(f, "ack ({:?})", self.handled),
            Action::Redeliver { after } => {
                write!(f, "redeliver after {after:?} ({:?})", self.handled)
            }
            Action::DeadLetter { reason } => write!(f, "dead-letter: {reason}"),
        }
    }
}
