//! `IdempotencyLayer`: idempotency for the unary methods it names.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;
use idem_core::{Engine, Scope};
use tonic::Status;
use tower_layer::Layer;

use crate::config::Config;
use crate::record_codes::RecordCodes;
use crate::service::IdempotencyService;

/// A tower [`Layer`] for tonic servers that runs each covered unary method
/// at most once per idempotency key, recording its outcome (the response
/// message and metadata, or the final status) and answering retries with
/// it.
///
/// It covers the methods named with [`method`](Self::method) and nothing
/// else: every other call, streaming ones included, passes through
/// untouched. A covered call must carry exactly one request message.
///
/// ```no_run
/// use idem_core::{Engine, MemoryStore};
/// use idem_tonic::IdempotencyLayer;
///
/// let engine = Engine::new(MemoryStore::new());
/// let layer = IdempotencyLayer::new(engine).method("/payments.v1.Ledger/Debit");
/// // tonic::transport::Server::builder().layer(layer).add_service(...)
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    pub(crate) engine: Engine,
    pub(crate) config: Arc<Config>,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("engine", &self.engine)
            .field("methods", &self.config.methods)
            .field("key", &self.config.key)
            .field("key_required", &self.config.key_required)
            .field("record", &self.config.record)
            .finish_non_exhaustive()
    }
}

impl IdempotencyLayer {
    /// A layer over `engine` covering no method yet: the key in
    /// `idempotency-key` metadata and required, one global scope, request
    /// and recorded response messages up to 4 MiB (tonic's default message
    /// limit), transient codes not recorded.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            config: Arc::new(Config {
                methods: Vec::new(),
                key: HeaderName::from_static(idem_http::IDEMPOTENCY_KEY),
                key_required: true,
                scope: Arc::new(|_, _| Ok(Scope::global())),
                max_request: 4 << 20,
                max_response: 4 << 20,
                record: RecordCodes::default(),
            }),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// Covers the unary method `path`: `/package.Service/Method` (the
    /// leading `/` may be left out). Name only unary methods: a streaming
    /// call to a covered method is refused with `INVALID_ARGUMENT` if it
    /// sends other than one message.
    #[must_use]
    pub fn method(mut self, path: &str) -> Self {
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        self.config_mut().methods.push(path);
        self
    }

    /// The metadata key carrying the idempotency key (default
    /// `idempotency-key`).
    #[must_use]
    pub fn key_metadata(mut self, name: HeaderName) -> Self {
        self.config_mut().key = name;
        self
    }

    /// Whether a covered call without a key is refused with
    /// `INVALID_ARGUMENT` (default `true`) or passes through without
    /// protection (`false`).
    #[must_use]
    pub fn key_required(mut self, required: bool) -> Self {
        self.config_mut().key_required = required;
        self
    }

    /// How to find a call's scope (the principal, tenant or account whose
    /// keys these are) from its request head (metadata included) and its
    /// request message as encoded (decode it with the method's message type,
    /// `prost::Message::decode`; a `gzip` or `deflate` message comes
    /// decompressed). On `Err(status)` the client gets that
    /// status before anything runs.
    ///
    /// ```
    /// use idem_core::{Engine, MemoryStore, Scope};
    /// use idem_tonic::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new(Engine::new(MemoryStore::new()))
    ///     .method("/payments.v1.Ledger/Debit")
    ///     // keys are namespaced by the authenticated tenant
    ///     .scope(|parts, _message| {
    ///         parts
    ///             .headers
    ///             .get("x-tenant")
    ///             .and_then(|v| v.to_str().ok())
    ///             .map(Scope::new)
    ///             .ok_or_else(|| tonic::Status::unauthenticated("no tenant"))
    ///     });
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn scope<F>(mut self, scope: F) -> Self
    where
        F: Fn(&Parts, &[u8]) -> Result<Scope, Status> + Send + Sync + 'static,
    {
        self.config_mut().scope = Arc::new(scope);
        self
    }

    /// The largest request accepted, in bytes of its message frame (default
    /// 4 MiB); a larger one gets `RESOURCE_EXHAUSTED` before anything runs.
    #[must_use]
    pub fn max_request(mut self, bytes: usize) -> Self {
        self.config_mut().max_request = bytes;
        self
    }

    /// The largest response recorded, in bytes of its message frames
    /// (default 4 MiB); a larger one is served, and retries get `INTERNAL`
    /// with `idem-problem: response-not-recorded`.
    #[must_use]
    pub fn max_response(mut self, bytes: usize) -> Self {
        self.config_mut().max_response = bytes;
        self
    }

    /// Which final statuses are recorded (default: all but the transient
    /// ones).
    #[must_use]
    pub fn record(mut self, codes: RecordCodes) -> Self {
        self.config_mut().record = codes;
        self
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            engine: self.engine.clone(),
            config: Arc::clone(&self.config),
        }
    }
}
