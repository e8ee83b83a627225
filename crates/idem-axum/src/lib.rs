//! # idem-axum
//!
//! The HTTP adapter of idem for axum, following the IETF draft "The
//! Idempotency-Key HTTP Header Field" and Stripe's practice. Two ways in:
//!
//! - [`IdempotencyLayer`], a tower layer for whole routers, with a per-request
//!   scope (the authenticated principal, say);
//! - [`Idempotent`], an extractor for handlers that make themselves idempotent
//!   (the `#[idempotent]` attribute builds on it).
//!
//! ```no_run
//! use axum::{extract::{FromRef, Path, State}, routing::post, Json, Router};
//! use idem_axum::{idempotent, IdempotencyLayer};
//! use idem_core::{Engine, MemoryStore};
//!
//! #[derive(Clone, FromRef)]
//! struct App { engine: Engine }
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { sku: String }
//!
//! // One handler made idempotent by the attribute...
//! #[idempotent(ttl = "24h", scope = "customer")]
//! async fn place(State(_app): State<App>, Path(customer): Path<String>, Json(order): Json<Order>) -> String {
//!     format!("{customer} ordered {}", order.sku)
//! }
//!
//! # async fn serve() {
//! let engine = Engine::new(MemoryStore::new());
//! let app = Router::new()
//!     .route("/customers/{customer}/orders", post(place))
//!     .with_state(App { engine: engine.clone() })
//!     // ...and a whole router made idempotent by the layer.
//!     .merge(
//!         Router::new()
//!             .route("/refunds", post(|| async { "refunded" }))
//!             .layer(IdempotencyLayer::new(engine)),
//!     );
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await.unwrap();
//! axum::serve(listener, app).await.unwrap();
//! # }
//! ```
//!
//! ## The policy, as clients see it
//!
//! | situation | answer |
//! | --- | --- |
//! | key missing where required | 400, `urn:idem:problem:key-missing` |
//! | key malformed: empty, over 255 characters, not visible ASCII, sent twice | 400, `urn:idem:problem:key-malformed` |
//! | first request | the handler runs; its status, end-to-end headers and body are recorded |
//! | retry after completion, same request | the recorded status, headers and body, byte for byte, plus `Idempotent-Replayed: true` |
//! | retry while the first is in flight | 409, `urn:idem:problem:request-in-flight`, `Retry-After: 1` (or a wait, per policy) |
//! | same key, different request | 422, `urn:idem:problem:key-reused`, nothing of the first answer |
//! | request body over the limit (default 1 MiB) | 413, `urn:idem:problem:request-too-large`; nothing runs |
//! | idempotency store unreachable | 503, `urn:idem:problem:store-unavailable`, `Retry-After`; the handler does not run |
//! | handler answers 5xx | not recorded (the claim is released, a retry runs again); [`RecordPolicy::All`] records it |
//! | response body over the limit (default 1 MiB) | served; retries get 500 `urn:idem:problem:response-not-recorded` (it ran: it does not run again) |
//! | the client hangs up (or a timeout layer gives up) while the handler runs | nothing is cancelled: the handler runs to its end (on a task of its own once the connection is gone) and its response is recorded; the retry gets the replay, or 409 while it still runs |
//! | the client hangs up before its claim was answered (a slow store) | the handler does not start for nobody: the claim is released as the store answers, and the retry runs it |
//! | the handler panics | 500, `urn:idem:problem:handler-failed`; its outcome is unknown, so the key answers 409 until the claim's lease ends (10 s by default), then runs again |
//! | the handler outlived its claim, which was taken over | 409, `urn:idem:problem:lease-lost`, `Retry-After` |
//!
//! Every problem is `application/problem+json` (RFC 9457) with `type`,
//! `title`, `status` and a `detail` that says what to do. [`problem_json`]
//! does the same for the errors that axum's extractors and router answer
//! (malformed or oversized bodies, wrong content type, 404, 405). Records are kept for
//! the engine's TTL (24 hours by default): a key may be reused for a new
//! request only after that.
//!
//! The key is a bare token or an RFC 8941 quoted string (`"abc"` and `abc`
//! are the same key). A request is the same request when its method, route,
//! path, query parameters (in any order) and body match; a JSON body is
//! compared parsed, so key order and whitespace do not matter.

mod admin;
mod commit_response;
mod extract;
mod handler;
mod handler_input;
mod handler_key;
mod headers;
mod layer;
mod problem;
mod problem_format;
mod problem_json;
mod record;
mod request_head;
mod respond;
mod service;

pub use admin::admin_router;
pub use commit_response::{commit_response, try_commit_response, Conflict};
pub use extract::Idempotent;
pub use handler_input::PER_ATTEMPT_HEADERS;
pub use headers::{IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
pub use idem_http::RecordPolicy;
pub use layer::{Axum, IdempotencyLayer};
pub use problem::{Problem, ProblemKind, PROBLEM_TYPE_PREFIX};
pub use problem_format::problem_format;
pub use problem_json::problem_json;
pub use record::encode as encode_response;
pub use service::IdempotencyService;

/// `#[idempotent(ttl = "24h", scope = "account")]` on an axum handler: the key
/// from the `Idempotency-Key` header, the engine from the router state, the
/// response recorded and replayed with this crate's HTTP semantics. See the
/// attribute's documentation for every argument.
pub use idem_macros::idempotent;

#[doc(hidden)]
pub mod __private {
    //! What the code generated by `#[idempotent]` calls on axum handlers. Not
    //! a public API.
    pub use crate::__idem_import_tags as import_tags;
    pub use crate::extract::{fingerprint_failed, Idempotent};
    pub use crate::handler::{
        EngineInState, HandlerContext, HandlerRequest, HandlerResponse, HeaderKey,
    };
    pub use crate::handler_input::{
        tag, Added, BodyTag, BodyValue, Fingerprintable, HeaderTag, InnerTag, SerializeTag,
        SkipTag, Tagged, ViaKnown, ViaSerialize, Wrapper,
    };
    pub use crate::handler_key::{header_scope, OptionalHeaderKey};
    pub use axum::response::{IntoResponse, Response};
    pub use http::HeaderMap;
    pub use idem_core::__private::*;
}
