//! The answer pipeline for axum: axum's answers are `http` responses with
//! axum's body ([`Axum`] is an [`HttpFramework`]), and `respond` runs a
//! handler through [`idem_http::adapter::respond`] with them.

use std::future::Future;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use idem_core::{Call, Claim, Engine};
use idem_http::adapter::{HttpAnswers, HttpFramework, UnrecordableBody};
use idem_http::Settings;

use crate::layer::Axum;

impl HttpFramework for Axum {
    type Body = Body;

    fn whole(data: Bytes) -> Body {
        Body::from(data)
    }

    fn rest(rest: UnrecordableBody<Body>) -> Body {
        Body::new(rest)
    }
}

/// Runs `handler` through the engine for `call` ([`idem_http::adapter::respond`]),
/// and answers with the handler's response, a replay, or a problem. The
/// handler is never cancelled half-way: a client that hangs up (or a
/// timeout layer above that gives up) leaves it to run to its end on a task
/// of its own, and its response is recorded for the retry.
pub(crate) async fn respond<F, Fut, R>(
    engine: Engine,
    call: Call,
    settings: Settings,
    handler: F,
) -> Response
where
    F: FnOnce(Claim) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoResponse,
{
    let handler = |claim| async move { handler(claim).await.into_response() };
    idem_http::adapter::respond(HttpAnswers::<Axum>::new(settings), engine, call, handler).await
}
