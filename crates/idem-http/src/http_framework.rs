//! `HttpFramework`: a web framework whose answers are `http::Response`s
//! (axum, bare hyper, ...). It names its body type and how a body is made;
//! the rest of [`Framework`] is written here once, for every such
//! framework ([`HttpAnswers`]).

use std::fmt;
use std::marker::PhantomData;

use bytes::Bytes;
use http::response::Parts;
use http::Response;

use crate::body::{BoxError, UnrecordableBody};
use crate::framework::{AnswerBody, Framework};
use crate::problem::Problem;
use crate::record::{RecordedResponse, Unreadable};
use crate::recording::fields;
use crate::settings::Settings;

/// A web framework that answers with `http::Response<Self::Body>`: all an
/// adapter on `http` types writes for the answer pipeline, on a type of
/// its own (`idem_axum::Axum`). Its answers are [`HttpAnswers`].
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::combinators::BoxBody;
/// use http_body_util::{BodyExt as _, Full};
/// use idem_http::adapter::{BoxError, HttpFramework, UnrecordableBody};
///
/// /// A bare hyper server whose responses have boxed bodies.
/// enum Bare {}
///
/// impl HttpFramework for Bare {
///     type Body = BoxBody<Bytes, BoxError>;
///
///     fn whole(data: Bytes) -> Self::Body {
///         Full::new(data).map_err(|never| match never {}).boxed()
///     }
///
///     fn rest(rest: UnrecordableBody<Self::Body>) -> Self::Body {
///         rest.boxed()
///     }
/// }
/// ```
pub trait HttpFramework: 'static {
    /// The framework's response body.
    type Body: http_body::Body<Data = Bytes, Error: Into<BoxError>>;

    /// A body of `data`, whole: a replayed, recorded or problem answer's.
    fn whole(data: Bytes) -> Self::Body;

    /// A body that serves what was read of an answer too large to record,
    /// then the rest as it streams.
    fn rest(rest: UnrecordableBody<Self::Body>) -> Self::Body;
}

/// The answers of an [`HttpFramework`] `M` under a route's settings: the
/// [`Framework`] every adapter on `http` types runs the pipeline with.
/// Problems are answered as `application/problem+json`
/// ([`Problem::response`]); trailers are neither recorded nor replayed.
pub struct HttpAnswers<M> {
    settings: Settings,
    framework: PhantomData<fn() -> M>,
}

impl<M> HttpAnswers<M> {
    /// `M`'s answers under `settings`.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            framework: PhantomData,
        }
    }
}

// Not derived: that would ask `M: Clone` of a marker type.
impl<M> Clone for HttpAnswers<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for HttpAnswers<M> {}

impl<M> fmt::Debug for HttpAnswers<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HttpAnswers").field(&self.settings).finish()
    }
}

impl<M: HttpFramework> Framework for HttpAnswers<M> {
    type Answer = Response<M::Body>;
    type Head = Parts;
    type Body = M::Body;

    fn settings(&self) -> Settings {
        self.settings
    }

    fn split(&self, answer: Self::Answer) -> Result<(Parts, M::Body), Self::Answer> {
        Ok(answer.into_parts())
    }

    fn status(&self, head: &Parts) -> u16 {
        head.status.as_u16()
    }

    fn headers<'h>(&self, head: &'h Parts) -> Vec<(&'h str, &'h [u8])> {
        fields(&head.headers)
    }

    fn join(&self, head: Parts, body: AnswerBody<M::Body>) -> Self::Answer {
        let body = match body {
            AnswerBody::Unread(body) => body,
            // Trailers are neither recorded nor replayed.
            AnswerBody::Whole { data, .. } => M::whole(data),
            AnswerBody::Unrecordable(rest) => M::rest(rest),
        };
        Response::from_parts(head, body)
    }

    fn replay(&self, recorded: RecordedResponse) -> Result<Self::Answer, Unreadable> {
        recorded.into_response(|body, _| M::whole(body))
    }

    fn problem(&self, problem: &Problem) -> Self::Answer {
        problem.response(M::whole)
    }

    fn nobody(&self) -> Self::Answer {
        Response::new(M::whole(Bytes::new()))
    }
}
