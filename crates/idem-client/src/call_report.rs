//! `CallReport`: how a logical request went, what the middleware puts in
//! its response's extensions.

/// How a logical request went, in its response's extensions
/// ([`ResponseExt::call_report`](crate::ResponseExt::call_report)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallReport {
    /// The key every attempt carried.
    pub key: String,
    /// Whether the key was derived from the claim of the operation that
    /// made the request ([`IdempotentRetries::propagate`](crate::IdempotentRetries::propagate)).
    pub derived: bool,
    /// How many attempts were made, the first included.
    pub attempts: u32,
    /// Whether the answer is a replay of an earlier attempt's outcome
    /// (`Idempotent-Replayed: true`, or the header named by
    /// [`IdempotentRetries::replay_header`](crate::IdempotentRetries::replay_header)):
    /// the request had run before.
    pub replayed: bool,
}

impl CallReport {
    /// How a call went, from the key it carried and the answer's headers
    /// (`<replay header>: true` marks a replay).
    pub(crate) fn of(
        key: String,
        derived: bool,
        attempts: u32,
        headers: &http::HeaderMap,
        replay_header: &http::HeaderName,
    ) -> Self {
        let replayed = headers
            .get(replay_header)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        Self {
            key,
            derived,
            attempts,
            replayed,
        }
    }
}
