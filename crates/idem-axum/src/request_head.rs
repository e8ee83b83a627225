//! `RequestHead`: what the extractor and the attribute's handler take from a
//! request's head before the handler runs, and where its fingerprint starts.

use std::borrow::Cow;
use std::future::Future;

use axum::extract::MatchedPath;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{Method, Uri};
use idem_core::{Call, Claim, Engine, FingerprintBuilder};

use crate::respond;
use idem_http::adapter::request_fingerprint;
use idem_http::Settings;

/// The request line, the settings and the operation's name.
#[derive(Clone, Debug)]
pub(crate) struct RequestHead {
    method: Method,
    route: Option<MatchedPath>,
    uri: Uri,
    pub(crate) settings: Settings,
    pub(crate) operation: Cow<'static, str>,
}

impl RequestHead {
    /// Reads the head of the request in `parts`.
    pub(crate) fn new(parts: &Parts) -> Self {
        Self {
            method: parts.method.clone(),
            route: parts.extensions.get::<MatchedPath>().cloned(),
            uri: parts.uri.clone(),
            settings: Settings::default(),
            operation: Cow::Borrowed("http"),
        }
    }

    /// The fingerprint so far: operation, method, route, path and query.
    pub(crate) fn builder(&self) -> FingerprintBuilder {
        request_fingerprint(
            &self.operation,
            self.method.as_str(),
            self.route.as_ref().map(MatchedPath::as_str),
            self.uri.path(),
            self.uri.query(),
        )
    }

    /// Runs `op` once for `call` on `engine`, recording its response. (The
    /// answer's own future, not one around it: see `HandlerContext::run`.)
    pub(crate) fn respond<F, Fut, R>(
        self,
        engine: Engine,
        call: Call,
        op: F,
    ) -> impl Future<Output = Response> + Send
    where
        F: FnOnce(Claim) -> Fut + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoResponse,
    {
        let call = call.with_operation(self.operation);
        respond::respond(engine, call, self.settings, op)
    }
}
