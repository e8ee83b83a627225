//! `Config`: what the layer is configured with, shared by the layer that
//! builds it (`IdempotencyLayer`) and the service that reads it.

use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;
use idem_core::Scope;
use tonic::Status;

use crate::record_codes::RecordCodes;

/// How a call's scope is read from its request head and message.
pub(crate) type ScopeFn = dyn Fn(&Parts, &[u8]) -> Result<Scope, Status> + Send + Sync;

/// What the layer is configured with.
#[derive(Clone)]
pub(crate) struct Config {
    /// Full method paths, `/package.Service/Method`.
    pub(crate) methods: Vec<String>,
    pub(crate) key: HeaderName,
    pub(crate) key_required: bool,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) max_request: usize,
    pub(crate) max_response: usize,
    pub(crate) record: RecordCodes,
}
