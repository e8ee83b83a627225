//! `IdempotencyLayer`: idempotency for the unary methods it names.

use std::sync::Arc;

use http::request::Parts;
use idem_core::Scope;
use idem_http::adapter::{Adapter, ScopeFrom};
use idem_http::{Idempotency, Problem, ProblemKind};
use tonic::Status;

use crate::record_codes::RecordCodes;

/// A tower [`Layer`](tower_layer::Layer) for tonic servers that runs each
/// covered unary method at most once per idempotency key, recording its
/// outcome (the response message and metadata, or the final status) and
/// answering retries with it: [`idem_http::Idempotency`] for tonic, with the
/// setters every adapter shares.
///
/// It covers the methods named with `method` (a unary method's path,
/// `/package.Service/Method`) and nothing else: every other call,
/// streaming ones included, passes through untouched. A covered call must
/// carry exactly one request message; a streaming call to a covered method
/// is refused with `INVALID_ARGUMENT` if it sends other than one.
///
/// Its defaults: no method covered, the key in `idempotency-key` metadata
/// (`key_header`) and required (`INVALID_ARGUMENT` without it), one global
/// scope, request and recorded response messages up to 4 MiB of frames
/// (`max_request_body` refuses a larger request with `RESOURCE_EXHAUSTED`;
/// a larger response is served and retries get `INTERNAL` with
/// `idem-problem: response-not-recorded`), transient codes not recorded
/// ([`RecordCodes`]).
///
/// The scope function gets the request head (metadata included) and the
/// request message as encoded (decode it with the method's message type,
/// `prost::Message::decode`; a `gzip` or `deflate` message comes
/// decompressed); on `Err(status)` the client gets that status before
/// anything runs.
///
/// ```
/// use idem_core::{Engine, MemoryStore, Scope};
/// use idem_tonic::IdempotencyLayer;
///
/// let layer = IdempotencyLayer::new(Engine::new(MemoryStore::new()))
///     .method("/payments.v1.Ledger/Debit")
///     // keys are namespaced by the authenticated tenant
///     .scope(|parts: &http::request::Parts, _message: &[u8]| {
///         parts
///             .headers
///             .get("x-tenant")
///             .and_then(|v| v.to_str().ok())
///             .map(Scope::new)
///             .ok_or_else(|| tonic::Status::unauthenticated("no tenant"))
///     });
/// // tonic::transport::Server::builder().layer(layer).add_service(...)
/// # let _ = layer;
/// ```
pub type IdempotencyLayer = Idempotency<Tonic>;

/// idem's adapter for tonic: what [`IdempotencyLayer`] covers (unary
/// methods, by path), how it reads a scope (from the request head and the
/// message), and which final statuses it records ([`RecordCodes`]).
#[derive(Clone, Copy, Debug)]
pub struct Tonic;

/// How a call's scope is read from its request head and message.
pub(crate) type ScopeFn = dyn Fn(&Parts, &[u8]) -> Result<Scope, Status> + Send + Sync;

impl Adapter for Tonic {
    type Method = String;
    type ScopeFn = ScopeFn;
    type Record = RecordCodes;

    /// None: a layer covers the methods it names.
    fn default_methods() -> Vec<String> {
        Vec::new()
    }

    fn global_scope() -> Arc<ScopeFn> {
        Arc::new(|_, _| Ok(Scope::global()))
    }

    /// 4 MiB, tonic's default message limit.
    fn default_limit() -> usize {
        4 << 20
    }

    /// In gRPC's words: metadata, a method, a call.
    fn key_missing(header: &str) -> Problem {
        Problem::new(
            ProblemKind::KeyMissing,
            format!(
                "this method requires an idempotency key in `{header}` metadata: send a unique \
                 value (a UUID, say) with each new call and the same value when retrying it"
            ),
        )
    }

    /// `/package.Service/Method`, the leading `/` added if left out.
    fn method(path: String) -> String {
        if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        }
    }
}

impl<F> ScopeFrom<F> for Tonic
where
    F: Fn(&Parts, &[u8]) -> Result<Scope, Status> + Send + Sync + 'static,
{
    fn scope_fn(f: F) -> Arc<ScopeFn> {
        Arc::new(f)
    }
}
