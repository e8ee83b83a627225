//! `Adapter`: a framework adapter's vocabulary for the builder every
//! adapter shares, and `ScopeFrom`, how a user's scope function becomes the
//! adapter's.

use std::fmt;
use std::sync::Arc;

use crate::problem::Problem;

/// A framework adapter's vocabulary for [`Idempotency`](crate::Idempotency): what names a
/// covered operation, how a scope is read, and which answers are recorded.
/// Each adapter implements it once, on a marker type (`idem_axum::Axum`).
pub trait Adapter: Sized + 'static {
    /// What names a covered operation: an HTTP method, a gRPC method path.
    type Method: Clone + fmt::Debug + PartialEq + Send + Sync + std::str::FromStr;
    /// How a request's scope is read (a `dyn Fn` of the framework's
    /// request).
    type ScopeFn: ?Sized + Send + Sync;
    /// Which answers are recorded.
    type Record: Copy + fmt::Debug + Default + Send + Sync;
    /// The scope of every request until told otherwise: one global scope.
    fn global_scope() -> Arc<Self::ScopeFn>;
    /// The methods covered until told otherwise: `POST` and `PATCH`, the
    /// HTTP methods that are not idempotent by their definition.
    fn default_methods() -> Vec<Self::Method> {
        ["POST", "PATCH"]
            .into_iter()
            .filter_map(|m| m.parse().ok())
            .collect()
    }
    /// The request and recorded response limit until told otherwise
    /// (1 MiB).
    fn default_limit() -> usize {
        1 << 20
    }
    /// A method as named by the user, as the adapter compares it (by
    /// default unchanged).
    fn method(method: Self::Method) -> Self::Method {
        method
    }
    /// The problem for a covered request without a key where one is
    /// required, the key expected in `header` (by default HTTP's words).
    fn key_missing(header: &str) -> Problem {
        Problem::key_missing_from(header)
    }
}

/// How a user's scope function becomes the adapter's ([`Idempotency::scope`](crate::Idempotency::scope)).
pub trait ScopeFrom<F>: Adapter {
    /// `f`, as the adapter calls it.
    fn scope_fn(f: F) -> Arc<Self::ScopeFn>;
}
