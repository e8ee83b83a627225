//! # idem-client
//!
//! The caller's half of idem. Exactly-once needs both ends: the server runs
//! a request once per key; the caller must send one key per logical
//! request, the same on every retry, and retry only what is safe.
//! [`IdempotentRetries`] does that for a `reqwest` client through
//! `reqwest-middleware`:
//!
//! - one key per logical request, minted before the first attempt (random
//!   or time-ordered UUIDs, or the caller's own: an `Idempotency-Key`
//!   header already set, or a [`Key`] extension), under a configurable
//!   header, so it serves any API that takes idempotency keys;
//! - retries with that key of what is safe to retry ([`RetryPolicy`]): no
//!   answer at all (the request may have run: that is what the key is
//!   for), `409` in flight, `429` and `503` honouring `Retry-After` up to a
//!   cap, other 5xx by policy; never `422` (the key was reused for another
//!   request) or another 4xx; full-jitter backoff, a maximum of attempts
//!   and a total deadline;
//! - what happened, in the response ([`ResponseExt`]): the key, the
//!   attempts, whether the answer is a replay, and idem's problems as a
//!   typed [`ProblemError`];
//! - opt-in, keys that follow the work downstream
//!   ([`IdempotentRetries::propagate`]): a request sent from inside an
//!   idempotent operation carries a key derived from the operation's
//!   claim and its [`CallSite`], so that a takeover's repeated downstream
//!   call is answered by the downstream service with its first outcome;
//! - the same for tonic clients (feature `grpc`): `GrpcIdempotencyLayer`,
//!   a tower layer over a `Channel`.

mod call_failed;
mod call_report;
#[cfg(feature = "grpc")]
mod grpc;
mod key;
mod middleware;
mod policy;
mod problem_error;
mod response_ext;

pub use call_failed::CallFailed;
pub use call_report::CallReport;
#[cfg(feature = "grpc")]
pub use grpc::{GrpcIdempotency, GrpcIdempotencyLayer};
pub use idem_http::ProblemKind;
pub use key::{CallSite, Key, KeyMint};
pub use middleware::IdempotentRetries;
pub use policy::{Attempt, NextAttempt, RetryPolicy};
pub use problem_error::ProblemError;
pub use response_ext::ResponseExt;
