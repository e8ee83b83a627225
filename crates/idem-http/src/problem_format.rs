//! Answers in the application's own error format: a layer that finds the
//! responses idem gave on its own (each carries its [`Problem`] in its
//! extensions) and has the application render them instead.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::header::RETRY_AFTER;
use http::HeaderValue;
use tower_layer::Layer;
use tower_service::Service;

use crate::problem::Problem;

/// Renders idem's own answers with `render`: every response idem gave on
/// its own (a missing or malformed key, a duplicate in flight, a reused
/// key, a store that is down, a handler that panicked, ...) is replaced by
/// `render(&problem)`, where the [`Problem`] says what happened
/// ([`Problem::kind`], [`Problem::status`], [`Problem::detail`],
/// [`Problem::retry_after_secs`]). If the rendered response has no
/// `Retry-After` and the problem has one, it is added: clients (and
/// idem-client) need it to know when to retry. Every other response,
/// whatever its status, passes untouched.
///
/// Put it outside idem's layer (or around the routes whose handlers carry
/// `#[idempotent]`). The adapters re-export it for their response types:
/// `idem_axum::problem_format`, `idem_tonic::problem_format`.
#[derive(Clone, Debug)]
pub struct ProblemFormat<F> {
    render: F,
}

impl<F> ProblemFormat<F> {
    /// The layer, rendering with `render`.
    pub fn new(render: F) -> Self {
        Self { render }
    }
}

impl<S, F: Clone> Layer<S> for ProblemFormat<F> {
    type Service = ProblemFormatService<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        ProblemFormatService {
            inner,
            render: self.render.clone(),
        }
    }
}

/// The service [`ProblemFormat`] wraps around another.
#[derive(Clone, Debug)]
pub struct ProblemFormatService<S, F> {
    inner: S,
    render: F,
}

impl<S, F, Req, B> Service<Req> for ProblemFormatService<S, F>
where
    S: Service<Req, Response = http::Response<B>>,
    F: Fn(&Problem) -> http::Response<B> + Clone,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = ProblemFormatFuture<S::Future, F>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        ProblemFormatFuture {
            inner: self.inner.call(request),
            render: Some(self.render.clone()),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`ProblemFormatService`].
    pub struct ProblemFormatFuture<Fut, F> {
        #[pin]
        inner: Fut,
        render: Option<F>,
    }
}

impl<Fut, F, B, E> Future for ProblemFormatFuture<Fut, F>
where
    Fut: Future<Output = Result<http::Response<B>, E>>,
    F: Fn(&Problem) -> http::Response<B>,
{
    type Output = Result<http::Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(match this.render.take() {
            Some(render) => reformat(response, render),
            None => response,
        }))
    }
}

/// `response` rendered by `render` if idem gave it on its own; untouched
/// otherwise. What [`ProblemFormat`] does to each response, for adapters
/// whose middleware is not a tower layer.
pub fn reformat<B>(
    response: http::Response<B>,
    render: impl FnOnce(&Problem) -> http::Response<B>,
) -> http::Response<B> {
    let Some(problem) = response.extensions().get::<Problem>().cloned() else {
        return response;
    };
    let mut rendered = render(&problem);
    if let Some(secs) = problem.retry_after_secs() {
        rendered
            .headers_mut()
            .entry(RETRY_AFTER)
            .or_insert_with(|| HeaderValue::from(secs));
    }
    rendered.extensions_mut().insert(problem);
    rendered
}
