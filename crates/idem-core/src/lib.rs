//! # idem-core
//!
//! Exactly-once effects for retried operations. A client (or a message broker)
//! may deliver the same request many times; the first delivery runs the
//! operation and records its result under the client's idempotency key, every
//! later delivery gets the recorded result back, and nothing runs twice.
//!
//! This crate is framework-agnostic: it holds the state machine
//! ([`machine::step`]), the [`Store`] trait, the [`Engine`] that runs an
//! operation once, the in-memory [`MemoryStore`], and (feature `testing`) the
//! conformance kit that every store must pass. HTTP adapters and the
//! `#[idempotent]` attribute build on it; queue consumers call the [`Engine`]
//! directly.
//!
//! ## The record
//!
//! A record is addressed by a [`RecordId`], the SHA-256 digest of a [`Scope`]
//! (the principal or tenant) and an [`IdempotencyKey`]. It holds the request's
//! [`Fingerprint`], a fencing token, and either a lease (in flight) or the
//! recorded [`Outcome`] (completed). `begin` answers exactly one of
//! [`Begin::Acquired`](store::Begin::Acquired), [`InFlight`](store::Begin::InFlight),
//! [`Replay`](store::Begin::Replay), [`Mismatch`](store::Begin::Mismatch) or
//! [`Expired`](store::Begin::Expired) (a late retry, told by the
//! record's trace); only the holder of the live lease can complete,
//! release or renew it.
//!
//! ## A claim's life
//!
//! The store grants a claim to the first call; its life is told in these
//! types:
//!
//! - [`Claim`]: what the operation runs under. Its fencing token and
//!   downstream keys carry the claim to the operation's effects, and
//!   [`Claim::commit`] records the outcome inside the operation's own
//!   transaction ([`CommitError`] if it could not).
//! - [`Completion`](adapter::Completion): how the operation asks its claim to end: record this
//!   outcome, release the claim (nothing took effect), or keep it until its
//!   lease ends (the outcome is unknown).
//! - [`Claimed`](adapter::Claimed): a claim taken in one place ([`Engine::begin`], which
//!   answers a [`Begun`](adapter::Begun)) and run under in another
//!   ([`Engine::execute_claimed`]); dropped unused, it is released.
//! - [`Execution`](adapter::Execution): what the engine answers: the operation ran now, or its
//!   recorded outcome was replayed. [`Engine::run`] does all of it for an
//!   operation that returns a `Result`, and answers a [`Ran`].
//!
//! ## Names by audience
//!
//! - **Applications**, at the crate's root: [`Engine`], [`Call`]
//!   ([`Scope`], [`IdempotencyKey`], [`Fingerprint`]), [`Policy`] and
//!   [`Overrides`], [`Claim`] and [`CommitError`], [`Ran`] and [`Error`],
//!   [`Failure`], [`MemoryStore`], [`Decision`] (what is logged and
//!   counted), [`idempotent`]; the store names an application meets:
//!   [`Store`] (to pick one), [`StoreTransaction`] and [`Outcome`] (a record
//!   committed in its own transaction), [`RecordId`], [`RecordInfo`] and
//!   [`Removal`] (an operator's look at a record).
//! - **Adapter authors** (HTTP and gRPC layers, queue consumers), in
//!   [`adapter`]: [`Engine::begin`] and [`Engine::execute_claimed`] with
//!   [`Claimed`](adapter::Claimed) and [`Begun`](adapter::Begun);
//!   [`Engine::execute`] with [`Completion`](adapter::Completion) and
//!   [`Execution`](adapter::Execution); batches
//!   ([`in_batch`](adapter::in_batch)).
//! - **Store authors**, in [`store`]: [`Store`] and [`StoreTransaction`],
//!   the answers ([`Begin`](store::Begin), [`Lease`], [`RecordInfo`],
//!   [`Removal`], [`StoreError`]), [`StoreFuture`](store::StoreFuture),
//!   [`RecordId`], [`spawn_purger`](store::spawn_purger),
//!   [`async_trait`](store::async_trait); the transition table
//!   ([`machine`]), waking waiters ([`waiters`]) and the conformance kit
//!   (`testing`, feature `testing`).
//!
//! Inside the engine, the granted claim is one value from the store's answer
//! to its end (`grant.rs`), held while the operation runs and then settled
//! (`held.rs`), or settled in the background when the store or the caller
//! could not wait (`settle.rs`).
//!
//! ## A queue consumer
//!
//! ```
//! use idem_core::{Call, Engine, Error, Failure, Fingerprint, IdempotencyKey, MemoryStore, Ran, Scope};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! enum ShipError { OutOfStock, CarrierDown }
//!
//! impl Failure for ShipError {
//!     // Out of stock is an answer (recorded); a carrier outage is retried.
//!     fn is_final(&self) -> bool { matches!(self, ShipError::OutOfStock) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::new(MemoryStore::new());
//! let call = Call::new(
//!     Scope::new("warehouse-1"),
//!     IdempotencyKey::parse("msg-0001")?,
//!     Fingerprint::of("ship", &("order-42", 3))?,
//! );
//! let shipped = engine
//!     .run(&call, |claim| async move {
//!         // claim.fencing_token() can be passed to the carrier's API here.
//!         Ok::<_, ShipError>(format!("parcel-{}", claim.fencing_token()))
//!     })
//!     .await;
//! match shipped {
//!     Ok(Ran::Executed(parcel)) => println!("shipped {parcel}"),
//!     Ok(Ran::Replayed(parcel)) => println!("already shipped as {parcel}"),
//!     Err(Error::InFlight { retry_after }) => println!("another worker has it; retry in {retry_after:?}"),
//!     Err(e) => println!("not shipped: {e:?}"),
//! }
//! # Ok(())
//! # }
//! ```

pub mod adapter;
mod batch;
mod call;
mod canonical;
mod claim;
mod claimed;
mod commit_error;
mod completion;
mod decision;
mod digest;
mod engine;
mod error;
mod failure;
mod fingerprint;
mod grant;
mod held;
mod ignored_fields;
mod in_flight;
mod key;
pub mod machine;
pub mod memory;
mod observe;
mod pending_begin;
mod policy;
mod purger;
mod ran;
mod result_codec;
mod run_report;
mod settle;
mod settled;
mod signals;
pub mod store;
mod store_error;
mod store_future;
#[cfg(feature = "testing")]
pub mod testing;
mod transaction;
pub mod waiters;

// The application's: running an operation once, what it is told, and the
// store names an application meets (a store to pick, a transaction to
// commit a record in, an operator's look at a record). An adapter author's
// names are in `adapter`, a store author's in `store`.
pub use call::Call;
pub use claim::Claim;
pub use commit_error::CommitError;
pub use decision::Decision;
pub use engine::Engine;
pub use error::{CodecError, Error};
pub use failure::{Failure, Never};
pub use fingerprint::{Fingerprint, FingerprintBuilder, FingerprintError, FingerprintKind};
pub use ignored_fields::{IgnoredFieldError, IgnoredFields};
pub use key::{IdempotencyKey, KeyError, RecordId, Scope, MAX_KEY_LEN};
pub use memory::{MemoryStore, MemoryTransaction, WhenFull};
pub use observe::STORE_DURATION_BUCKETS;
pub use policy::{OnInFlight, Overrides, Policy, DEFAULT_LEASE};
pub use ran::Ran;
pub use result_codec::encode_result;
pub use run_report::RunReport;
pub use signals::shutdown_on_signals;
pub use store::{
    FencingToken, Lease, Outcome, RecordInfo, RecordInfoState, Removal, Store, StoreError,
    StoreErrorKind,
};
pub use tokio_util::sync::CancellationToken;
pub use transaction::StoreTransaction;

/// `#[idempotent(engine = ..., key = ..., ttl = "7d")]` on an async function or
/// method: runs it at most once per key through the [`Engine`]. See the
/// attribute's own documentation for every argument; on axum handlers use
/// `idem_axum::idempotent`.
pub use idem_macros::idempotent_fn as idempotent;

#[doc(hidden)]
pub mod __private;
