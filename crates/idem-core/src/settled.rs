//! `Settled`: how an operation ended its claim itself.

/// How an operation settled its claim itself, through
/// [`Claim::commit`](crate::Claim::commit),
/// [`Claim::roll_back`](crate::Claim::roll_back) or
/// [`Claim::give_up`](crate::Claim::give_up): the engine honours it instead
/// of what the operation returns. A claim is settled once; the first word
/// stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The outcome was recorded in the transaction that committed.
    Recorded,
    /// Whether the transaction committed is unknown, or the claim was lost:
    /// nothing more is done, and the claim ends with its lease.
    Kept,
    /// Nothing of the operation was committed: the claim is released.
    Released,
}
