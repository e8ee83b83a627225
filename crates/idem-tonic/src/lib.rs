//! # idem-tonic
//!
//! The gRPC adapter of idem for tonic servers: [`IdempotencyLayer`], a tower
//! layer that runs each covered unary method at most once per idempotency
//! key and answers retries with the recorded outcome.
//!
//! - **The key** comes from request metadata, `idempotency-key` by default
//!   ([`IdempotencyLayer::key_header`]); the same rules as HTTP (1 to 255
//!   visible ASCII characters, sent once).
//! - **The fingerprint** is the full method name and the request message as
//!   encoded. Protobuf encoders (prost, protobuf-go, protobuf-java, ...)
//!   write a message's known fields in field-number order and leave fields
//!   at their default value out, so a retry of the same message gives the
//!   same bytes. What differs is a different request: unknown fields (from
//!   a newer schema) count, and a client that writes fields out of order or
//!   writes default values explicitly, both legal in protobuf, gets
//!   `FAILED_PRECONDITION` if it changes encoder between retries. A message
//!   compressed with `gzip` or `deflate` is compared decompressed (bounded
//!   by the request limit), so a retry sent with another compression or
//!   none is the same request; in any other encoding it is compared as
//!   sent, with its `grpc-encoding`.
//! - **The recorded outcome** is the response's metadata, its message frame
//!   and its trailers (the final status and trailing metadata), replayed
//!   byte for byte with `idempotent-replayed: true` metadata; or a
//!   trailers-only status.
//! - **Streaming methods** pass through untouched: the layer covers only
//!   the methods named with [`IdempotencyLayer::method`], which should be
//!   unary. A call to a covered method that sends other than exactly one
//!   message gets `INVALID_ARGUMENT`.
//! - **A client that gives up** (its deadline passes, or it cancels) does not
//!   cancel a method that holds a claim: the method finishes on a task of
//!   its own and its outcome is recorded, so the retry gets it (after
//!   `ABORTED` while it still runs). Releasing the claim instead would let
//!   the retry run the method a second time after it may have taken effect.
//!   A call whose deadline passes before its method started (while the
//!   claim was being taken) is not started: its claim is released as the
//!   store answers, and the retry runs the method.
//! - **The claim** is in the request's extensions
//!   (`request.extensions().get::<idem_core::Claim>()`), for the fencing
//!   token.
//! - **The method's own transaction**: a method whose effects are writes in
//!   the store's database (PostgreSQL) hands its open transaction to
//!   [`commit_with_record`] instead of committing it; the layer records the
//!   encoded response in it and commits, so the writes and the record
//!   commit together. A crash, or a claim lost while the method ran, then
//!   leaves both or neither: never an effect without its record for a
//!   retry to run again.
//!
//! What idem answers on its own, each with `idem-problem` metadata naming
//! the rule (the slug of the HTTP adapters' problem `type`):
//!
//! | event | code | `idem-problem` | retry info |
//! | --- | --- | --- | --- |
//! | no key / a malformed key | `INVALID_ARGUMENT` | `key-missing` / `key-malformed` | |
//! | not exactly one request message | `INVALID_ARGUMENT` | `bad-request` | |
//! | request over the limit | `RESOURCE_EXHAUSTED` | `request-too-large` | |
//! | a call with this key still runs | `ABORTED` | `request-in-flight` | 1 s |
//! | the key was used with another request | `FAILED_PRECONDITION` | `key-reused` | |
//! | the store cannot be reached | `UNAVAILABLE` | `store-unavailable` | 1 s |
//! | the claim was lost before recording | `ABORTED` | `lease-lost` | 1 s |
//! | the method's transaction: the record cannot be written / the commit failed | `UNAVAILABLE` | `store-unavailable` / `commit-uncertain` | 1 s |
//! | the method panicked | `INTERNAL` | `handler-failed` | |
//! | the response could not be recorded (retries) | `INTERNAL` | `response-not-recorded` | |
//! | a record cannot be read back | `INTERNAL` | `replay-unreadable` | |
//!
//! Retry info is a `google.rpc.RetryInfo` in the status details
//! (`grpc-status-details-bin`, read by [`retry_delay`]), and
//! `grpc-retry-pushback-ms` metadata for gRPC's own retry policies (gRFC
//! A6: grpcio, grpc-go and grpc-java read it, not the details), and
//! `retry-after` metadata in seconds for the rest.
//!
//! Which final statuses are recorded: see [`RecordCodes`]. By default the
//! transient codes ([`TRANSIENT_CODES`]: `UNAVAILABLE`, `DEADLINE_EXCEEDED`,
//! `INTERNAL`, ...) release the claim, so that a retry runs the method again;
//! `UNIMPLEMENTED` ([`NEVER_RECORDED`]), what the transport answers for an
//! encoding it does not accept, is never recorded; every other status, `OK`
//! included, is recorded.

mod answer;
mod commit_with_record;
mod deadline;
mod decompress;
mod frames;
mod layer;
mod problem_format;
mod record_codes;
mod respond;
mod retry_delay;
mod service;

pub use answer::{code, IDEM_PROBLEM, RETRY_PUSHBACK_MS};
pub use commit_with_record::commit_with_record;
pub use idem_http::{Problem, ProblemKind};
pub use idem_http::{IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use layer::{IdempotencyLayer, Tonic};
pub use problem_format::problem_format;
pub use record_codes::{RecordCodes, NEVER_RECORDED, TRANSIENT_CODES};
pub use retry_delay::retry_delay;
pub use service::IdempotencyService;
