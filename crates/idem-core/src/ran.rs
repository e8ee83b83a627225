//! `Ran`: whether a result was produced now or replayed.

/// Whether a result was produced now or replayed from the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ran<T> {
    /// The operation ran in this call.
    Executed(T),
    /// The operation had run before; this is its recorded result.
    Replayed(T),
}

impl<T> Ran<T> {
    /// The value, however it was obtained.
    pub fn into_inner(self) -> T {
        match self {
            Ran::Executed(t) | Ran::Replayed(t) => t,
        }
    }

    /// A reference to the value.
    pub fn get(&self) -> &T {
        match self {
            Ran::Executed(t) | Ran::Replayed(t) => t,
        }
    }

    /// Whether the value is a replay.
    pub fn is_replayed(&self) -> bool {
        matches!(self, Ran::Replayed(_))
    }

    /// Maps the value, keeping how it was obtained.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Ran<U> {
        match self {
            Ran::Executed(t) => Ran::Executed(f(t)),
            Ran::Replayed(t) => Ran::Replayed(f(t)),
        }
    }
}
