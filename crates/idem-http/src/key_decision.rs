//! `KeyDecision`: what a covered request's key header says to do: run it
//! under its key, pass it through, or refuse it.

use crate::headers::key_from_values;
use crate::problem::Problem;
use idem_core::IdempotencyKey;

/// What a covered request's key header says to do.
#[derive(Debug)]
pub enum KeyDecision {
    /// Run it under this key.
    Key(IdempotencyKey),
    /// No key, and keys are optional here: pass it through unprotected.
    PassThrough,
    /// Refuse it before anything runs: no key where one is required, or a
    /// malformed one.
    Refuse(Problem),
}

/// Reads the key from the values of the `header` header, in the order
/// received: the decision for a covered request.
pub fn key_decision<'a>(
    header: &str,
    required: bool,
    values: impl IntoIterator<Item = &'a [u8]>,
) -> KeyDecision {
    decide_key(values, required, || Problem::key_missing_from(header))
}

/// The decision for a covered request from its key's `values`; `missing`
/// is the problem for no key where one is `required`.
pub(crate) fn decide_key<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    required: bool,
    missing: impl FnOnce() -> Problem,
) -> KeyDecision {
    match key_from_values(values) {
        Ok(Some(key)) => KeyDecision::Key(key),
        Ok(None) if required => KeyDecision::Refuse(missing()),
        Ok(None) => KeyDecision::PassThrough,
        Err(e) => KeyDecision::Refuse(Problem::key_malformed(&e)),
    }
}
