//! `CallFailed`: a logical request that got no answer, with what a caller
//! needs to resume it rather than run it twice.

use std::error::Error as StdError;

use crate::key::Key;

type BoxError = Box<dyn StdError + Send + Sync>;

/// A logical request whose last attempt got no answer (the connection was
/// refused, reset or timed out, or the request could not be sent). Every
/// error the middleware returns for a covered request is this, inside
/// `reqwest_middleware::Error::Middleware` ([`CallFailed::in_error`]); over
/// gRPC it is the `tonic::Status`'s source ([`CallFailed::in_status`],
/// feature `grpc`), the status's code kept.
///
/// The server may have run the request (`may_have_run`): a caller that
/// retries it later must send the same key, or the work may run twice.
/// [`CallFailed::resume`] gives the [`Key`] extension that does so:
///
/// ```no_run
/// # async fn demo(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// let charge = || client.post("https://payments.example/v1/charges").body(r#"{"amount": 1000}"#);
/// match charge().send().await {
///     Ok(receipt) => { /* ran, or replayed */ }
///     Err(e) => match idem_client::CallFailed::in_error(&e) {
///         // Later (a job retried, a user who clicks again): the same key.
///         Some(failed) if failed.may_have_run => {
///             charge().with_extension(failed.resume()).send().await?;
///         }
///         _ => return Err(e),
///     },
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[error(
    "the request with idempotency key {key} got no answer after {attempts} attempt(s) ({}): {cause}",
    if *.may_have_run { "it may have run: send it again with the same key" } else { "it did not reach the server" }
)]
pub struct CallFailed {
    /// The key every attempt carried.
    pub key: String,
    /// How many attempts were made, the first included.
    pub attempts: u32,
    /// Whether any attempt may have run on the server: false only when
    /// every attempt was refused before it reached it (a refused
    /// connection, a request that could not be built) and no answer said it
    /// was running.
    pub may_have_run: bool,
    #[source]
    cause: BoxError,
}

impl CallFailed {
    pub(crate) fn new(key: String, attempts: u32, may_have_run: bool, cause: BoxError) -> Self {
        Self {
            key,
            attempts,
            may_have_run,
            cause,
        }
    }

    /// The extension that sends a request again under this call's key
    /// (`RequestBuilder::with_extension`).
    pub fn resume(&self) -> Key {
        Key::new(self.key.clone())
    }

    /// The `CallFailed` inside an error of the middleware, if it is one.
    pub fn in_error(e: &reqwest_middleware::Error) -> Option<&CallFailed> {
        match e {
            reqwest_middleware::Error::Middleware(e) => e.downcast_ref::<CallFailed>(),
            reqwest_middleware::Error::Reqwest(_) => None,
        }
    }

    /// The `CallFailed` behind a gRPC status, if the call failed without an
    /// answer.
    #[cfg(feature = "grpc")]
    pub fn in_status(status: &tonic::Status) -> Option<&CallFailed> {
        let mut source = StdError::source(status);
        while let Some(e) = source {
            if let Some(failed) = e.downcast_ref::<CallFailed>() {
                return Some(failed);
            }
            source = e.source();
        }
        None
    }
}

/// Whether an attempt that failed with `e` surely never reached the
/// server: the connection was refused.
pub(crate) fn never_reached(e: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        source = e.source();
    }
    false
}
