//! How each parameter of an `#[idempotent]` axum handler enters the request's
//! fingerprint: by its whole extracted value, whatever pattern the handler
//! binds it with.
//!
//! | parameter | what is fingerprinted |
//! | --- | --- |
//! | `Json<T>`, `Path<T>`, `Query<T>`, `Form<T>`, `Extension<T>` | the `T` value (serialized; JSON compared parsed) |
//! | `Bytes`, `String`, `Body`, `Request` | the body: parsed when the request is JSON, else byte for byte; `Body` and `Request` are buffered (within the body limit, else 413) and handed on whole |
//! | `HeaderMap` | every header but the per-attempt ones ([`PER_ATTEMPT_HEADERS`]), sorted by name |
//! | `State<S>` | nothing: the server's own state |
//! | `Method`, `Uri`, `OriginalUri`, `MatchedPath` | nothing more: method, route, path and query are always fingerprinted |
//! | any other extractor | its value, which must implement `serde::Serialize` (else a compile error names both fixes: derive it, or `skip` the parameter) |
//!
//! The dispatch is by type, through two traits tried in order (a concrete
//! type with a [`ViaKnown`] impl, else [`ViaSerialize`]); the generated code
//! calls `(&tag(&value)).tag_kind().add(value, ...)`.

// Every tag's `add` has the same shape (async, the value in and out, the
// answer to give instead as the error), so that the generated code calls
// them alike; the error is a whole response only on the rare refusal path.
#![allow(clippy::unused_async, clippy::result_large_err)]

use std::future::Future;
use std::marker::PhantomData;

use axum::body::Body;
use axum::extract::{Extension, MatchedPath, OriginalUri, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Form, Json};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};
use idem_core::{FingerprintBuilder, FingerprintError, IgnoredFields};
use serde::Serialize;

use crate::handler::HandlerRequest;
use crate::problem::Problem;
use idem_http::adapter::add_body;

/// Headers that may differ between two attempts of the same request and so
/// are left out of a `HeaderMap`'s fingerprint: the key itself, hop-by-hop
/// and framing headers, the date, credentials (tokens rotate between
/// retries: scope the keys by the principal instead), what the client and
/// the proxies on the way add, and tracing identifiers.
pub const PER_ATTEMPT_HEADERS: &[&str] = &[
    "idempotency-key",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "date",
    "authorization",
    "proxy-authorization",
    "cookie",
    "user-agent",
    "accept-encoding",
    "forwarded",
    "via",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "traceparent",
    "tracestate",
    "baggage",
    "x-request-id",
    "x-correlation-id",
    "x-amzn-trace-id",
];

/// The type of a handler parameter, carried without its value.
pub struct Tagged<T>(PhantomData<fn() -> T>);

/// The [`Tagged`] type of `value`.
pub fn tag<T>(_: &T) -> Tagged<T> {
    Tagged(PhantomData)
}

/// Parameters whose fingerprint idem knows (tried first).
pub trait ViaKnown {
    /// How the parameter is fingerprinted.
    type Tag;
    /// The tag.
    fn tag_kind(&self) -> Self::Tag;
}

/// Any other parameter: fingerprinted through `Serialize` (tried second).
pub trait ViaSerialize {
    /// The tag.
    fn tag_kind(&self) -> SerializeTag;
}

impl<T> ViaSerialize for &Tagged<T> {
    fn tag_kind(&self) -> SerializeTag {
        SerializeTag
    }
}

macro_rules! known {
    ($tag:ident: $($ty:ty),+ $(,)?) => {
        $(impl ViaKnown for Tagged<$ty> {
            type Tag = $tag;
            fn tag_kind(&self) -> $tag {
                $tag
            }
        })+
    };
    (<$g:ident> $tag:ident: $($ty:ty),+ $(,)?) => {
        $(impl<$g> ViaKnown for Tagged<$ty> {
            type Tag = $tag;
            fn tag_kind(&self) -> $tag {
                $tag
            }
        })+
    };
}

known!(<T> InnerTag: Json<T>, Path<T>, Query<T>, Form<T>, Extension<T>);
known!(<S> SkipTag: State<S>);
known!(SkipTag: Method, Uri, OriginalUri, MatchedPath);
known!(BodyTag: Bytes, String, Body, Request<Body>);
known!(HeaderTag: HeaderMap);

/// A value the fingerprint can include.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `serde::Serialize`, and `#[idempotent]` fingerprints every handler parameter",
    label = "not `serde::Serialize`",
    note = "derive or implement `serde::Serialize` for `{Self}`, or leave this parameter out of the fingerprint with `skip(<its binding>)` if it does not describe the request"
)]
pub trait Fingerprintable {
    /// Adds this value to `fp` under `label`.
    fn add_to(&self, fp: &mut FingerprintBuilder, label: &str) -> Result<(), FingerprintError>;
}

#[diagnostic::do_not_recommend]
impl<T: Serialize + ?Sized> Fingerprintable for T {
    fn add_to(&self, fp: &mut FingerprintBuilder, label: &str) -> Result<(), FingerprintError> {
        fp.serialize(label, self).map(|_| ())
    }
}

/// What a fingerprinted parameter becomes when it is added: the value back,
/// or the answer to give instead (a body over the limit, say).
pub type Added<T> = Result<T, Response>;

fn failed(e: &idem_core::FingerprintError) -> Response {
    crate::extract::fingerprint_failed(e)
}

/// A wrapper extractor whose inner value is what was asked.
pub trait Wrapper {
    /// The inner value's type.
    type Inner;
    /// The inner value.
    fn inner(&self) -> &Self::Inner;
}

macro_rules! wrapper {
    ($($ty:ident),+) => {
        $(impl<T> Wrapper for $ty<T> {
            type Inner = T;
            fn inner(&self) -> &T {
                &self.0
            }
        })+
    };
}

wrapper!(Json, Path, Query, Form, Extension);

/// `Json<T>` and the like: the inner `T`.
pub struct InnerTag;

impl InnerTag {
    /// Adds `value`'s inner value under `label`.
    pub async fn add<W>(
        self,
        value: W,
        _: &HandlerRequest,
        fp: &mut FingerprintBuilder,
        label: &str,
    ) -> Added<W>
    where
        W: Wrapper,
        W::Inner: Fingerprintable,
    {
        value.inner().add_to(fp, label).map_err(|e| failed(&e))?;
        Ok(value)
    }
}

/// Any other extractor: its `Serialize` value.
pub struct SerializeTag;

impl SerializeTag {
    /// Adds `value` under `label`.
    pub async fn add<T: Fingerprintable>(
        self,
        value: T,
        _: &HandlerRequest,
        fp: &mut FingerprintBuilder,
        label: &str,
    ) -> Added<T> {
        value.add_to(fp, label).map_err(|e| failed(&e))?;
        Ok(value)
    }
}

/// `State` and what is fingerprinted anyway: nothing.
pub struct SkipTag;

impl SkipTag {
    /// Adds nothing.
    pub async fn add<T>(
        self,
        value: T,
        _: &HandlerRequest,
        _: &mut FingerprintBuilder,
        _: &str,
    ) -> Added<T> {
        Ok(value)
    }
}

/// A `HeaderMap`: its headers but the per-attempt ones, sorted.
pub struct HeaderTag;

impl HeaderTag {
    /// Adds the headers under `label`.
    pub async fn add(
        self,
        value: HeaderMap,
        _: &HandlerRequest,
        fp: &mut FingerprintBuilder,
        label: &str,
    ) -> Added<HeaderMap> {
        let mut pairs: Vec<(&str, &[u8])> = value
            .iter()
            .filter(|(name, _)| !PER_ATTEMPT_HEADERS.contains(&name.as_str()))
            .map(|(name, v)| (name.as_str(), v.as_bytes()))
            .collect();
        // Stable within a name: repeated headers keep their order.
        pairs.sort_by(|a, b| a.0.cmp(b.0));
        fp.bytes(label, b"headers");
        for (name, v) in pairs {
            fp.bytes("header-name", name.as_bytes());
            fp.bytes("header-value", v);
        }
        Ok(value)
    }
}

/// A body extractor: the body's bytes, taken and handed on.
pub trait BodyValue: Sized + Send {
    /// What is kept aside while the bytes are read.
    type Rest: Send;
    /// The body's bytes (at most `limit`) and the rest.
    fn take(
        self,
        limit: usize,
    ) -> impl Future<Output = Result<(Bytes, Self::Rest), Response>> + Send;
    /// The value again, from its bytes and the rest.
    fn rebuild(bytes: Bytes, rest: Self::Rest) -> Self;
}

impl BodyValue for Bytes {
    type Rest = ();
    async fn take(self, _: usize) -> Result<(Bytes, ()), Response> {
        Ok((self, ()))
    }
    fn rebuild(bytes: Bytes, (): ()) -> Self {
        bytes
    }
}

impl BodyValue for String {
    type Rest = String;
    async fn take(self, _: usize) -> Result<(Bytes, String), Response> {
        Ok((Bytes::copy_from_slice(self.as_bytes()), self))
    }
    fn rebuild(_: Bytes, rest: String) -> Self {
        rest
    }
}

async fn read(body: Body, limit: usize) -> Result<Bytes, Response> {
    idem_http::adapter::read_request_body(None, body, limit)
        .await
        .map_err(|problem| Problem::from(problem).into_response())
}

impl BodyValue for Body {
    type Rest = ();
    async fn take(self, limit: usize) -> Result<(Bytes, ()), Response> {
        Ok((read(self, limit).await?, ()))
    }
    fn rebuild(bytes: Bytes, (): ()) -> Self {
        Body::from(bytes)
    }
}

impl BodyValue for Request<Body> {
    type Rest = http::request::Parts;
    async fn take(self, limit: usize) -> Result<(Bytes, Self::Rest), Response> {
        let (parts, body) = self.into_parts();
        Ok((read(body, limit).await?, parts))
    }
    fn rebuild(bytes: Bytes, parts: Self::Rest) -> Self {
        Request::from_parts(parts, Body::from(bytes))
    }
}

/// A body: parsed if the request is JSON, else byte for byte.
pub struct BodyTag;

impl BodyTag {
    /// Adds the body under `label` and hands the value on.
    pub async fn add<T: BodyValue>(
        self,
        value: T,
        request: &HandlerRequest,
        fp: &mut FingerprintBuilder,
        label: &str,
    ) -> Added<T> {
        let (bytes, rest) = value.take(request.max_request_body()).await?;
        add_body(fp, label, request.is_json(), &bytes, &IgnoredFields::NONE);
        Ok(T::rebuild(bytes, rest))
    }
}

/// Brings the fingerprint's tag traits into scope for the handler the
/// attribute generates, so that the generated code names the runtime only by
/// path (a wrong `crate = "..."` is then one error, not one per import).
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_import_tags {
    () => {
        #[allow(unused_imports)]
        use $crate::__private::{ViaKnown as _, ViaSerialize as _};
    };
}
