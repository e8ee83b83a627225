//! `RequestHead`: what the extractor and the attribute's handler take from a
//! request before the handler runs, and where its fingerprint starts.

use std::borrow::Cow;
use std::future::Future;

use axum::extract::{FromRef, MatchedPath};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{Method, Uri};
use idem_core::{Call, Claim, Engine, FingerprintBuilder};

use crate::exec::{self, request_fingerprint, Settings};

/// The engine from the router state, the request line, the settings and the
/// operation's name.
#[derive(Clone, Debug)]
pub(crate) struct RequestHead {
    engine: Engine,
    method: Method,
    route: Option<MatchedPath>,
    uri: Uri,
    pub(crate) settings: Settings,
    pub(crate) operation: Cow<'static, str>,
}

impl RequestHead {
    /// Reads the head of the request in `parts`, the engine from `state`.
    pub(crate) fn new<S>(parts: &Parts, state: &S) -> Self
    where
        Engine: FromRef<S>,
    {
        Self {
            engine: Engine::from_ref(state),
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
            &self.method,
            self.route.as_ref().map(MatchedPath::as_str),
            self.uri.path(),
            self.uri.query(),
        )
    }

    /// Runs `op` once for `call`, recording its response.
    pub(crate) async fn respond<F, Fut, R>(self, call: Call, op: F) -> Response
    where
        F: FnOnce(Claim) -> Fut + Send + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoResponse,
    {
        exec::respond(self.engine, call, self.settings, op).await
    }
}
