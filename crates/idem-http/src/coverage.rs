//! `Coverage`: what an adapter covers and how: which requests, where their
//! key is, how their scope is read, and the bounds and record policy that
//! apply to them.

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use idem_core::IgnoredFields;

use crate::adapter_trait::Adapter;
use crate::key_decision::{decide_key, KeyDecision};
use crate::record_policy::RecordPolicy;
use crate::settings::Settings;

/// What an adapter covers and how (see [`Idempotency`](crate::Idempotency)'s setters).
#[non_exhaustive]
pub struct Coverage<A: Adapter> {
    /// The covered methods.
    pub methods: Vec<A::Method>,
    /// The header (or gRPC metadata) that carries the key.
    pub key_header: HeaderName,
    /// Whether a covered request without a key is refused.
    pub key_required: bool,
    /// How a request's scope is read.
    pub scope: Arc<A::ScopeFn>,
    /// The largest request body accepted, in bytes.
    pub max_request_body: usize,
    /// The fields of a JSON body that the fingerprint leaves out.
    pub ignored_fields: IgnoredFields,
    /// The largest response body recorded, in bytes.
    pub max_response_body: usize,
    /// Which answers are recorded.
    pub record: A::Record,
}

impl<A: Adapter> Clone for Coverage<A> {
    fn clone(&self) -> Self {
        Self {
            methods: self.methods.clone(),
            key_header: self.key_header.clone(),
            key_required: self.key_required,
            scope: Arc::clone(&self.scope),
            max_request_body: self.max_request_body,
            ignored_fields: self.ignored_fields.clone(),
            max_response_body: self.max_response_body,
            record: self.record,
        }
    }
}

impl<A: Adapter> Coverage<A> {
    /// Whether requests for `method` are covered.
    pub fn covers<M: ?Sized>(&self, method: &M) -> bool
    where
        A::Method: PartialEq<M>,
    {
        self.methods.iter().any(|m| m == method)
    }

    /// What a covered request's key says to do, from the values of the key
    /// header (or metadata) in the order received: run it under its key,
    /// pass it through (no key, and keys are optional), or refuse it.
    pub fn key_decision<'a>(&self, values: impl IntoIterator<Item = &'a [u8]>) -> KeyDecision {
        decide_key(values, self.key_required, || {
            A::key_missing(self.key_header.as_str())
        })
    }
}

impl<A: Adapter<Record = RecordPolicy>> Coverage<A> {
    /// The bounds and record policy of an HTTP adapter's covered routes.
    pub fn settings(&self) -> Settings {
        Settings {
            max_request_body: self.max_request_body,
            max_response_body: self.max_response_body,
            record: self.record,
        }
    }
}

impl<A: Adapter> fmt::Debug for Coverage<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coverage")
            .field("methods", &self.methods)
            .field("key_header", &self.key_header)
            .field("key_required", &self.key_required)
            .field("max_request_body", &self.max_request_body)
            .field("ignored_fields", &self.ignored_fields)
            .field("max_response_body", &self.max_response_body)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}
