//! `Plan`: what the rules produce from the arguments and the function, and
//! `expand` turns into code.

use std::time::Duration;

use syn::{Expr, Ident, Type};

/// What a duplicate in flight gets.
pub(crate) enum OnConflict {
    Reject,
    Wait(Duration),
}

/// Which crate's attribute this is, which decides the form: `idem_core`'s
/// is always the function form; `idem_axum`'s and `idem_actix`'s are the
/// handler form of their framework unless `engine = ...` is given.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `idem_core::idempotent`.
    Core,
    /// `idem_axum::idempotent`.
    Axum,
    /// `idem_actix::idempotent`.
    Actix,
}

impl Origin {
    /// What the handler form makes, for messages: "an axum handler".
    pub(crate) fn handler(self) -> &'static str {
        match self {
            Origin::Actix => "an actix-web handler",
            Origin::Axum | Origin::Core => "an axum handler",
        }
    }
}

/// How the function is reached.
pub(crate) enum Mode {
    /// A handler of a web framework: the key comes from the
    /// `Idempotency-Key` header (or `key = ...`) and the engine from the
    /// router state (axum) or the app data (actix-web); the return is any
    /// response of that framework.
    Handler(Box<HandlerMode>),
    /// Any other async function: key and engine are expressions; the return is
    /// `Result<T, E>`.
    Plain(Box<PlainMode>),
}

/// The parts of a function that is not an axum handler.
pub(crate) struct PlainMode {
    pub(crate) key: Expr,
    pub(crate) engine: Expr,
    pub(crate) ok: Type,
    pub(crate) err: Type,
}

/// The parts of a handler.
pub(crate) struct HandlerMode {
    /// The framework.
    pub(crate) origin: Origin,
    /// `key = ...`, or `None` for the `Idempotency-Key` header.
    pub(crate) key: Option<Expr>,
    /// The binding that `scope = ...` names.
    pub(crate) scope: Option<Ident>,
    /// The header that `scope = header("...")` names, in lower case.
    pub(crate) scope_header: Option<syn::LitStr>,
    /// `key_required = false`: a request without a key runs unprotected.
    pub(crate) key_optional: bool,
    /// Per parameter, in order: whether `skip` leaves it out.
    pub(crate) skipped: Vec<bool>,
}

/// A parameter binding that goes into the fingerprint.
pub(crate) struct Input {
    pub(crate) ident: Ident,
}

/// Everything `expand` needs, checked.
pub(crate) struct Plan {
    pub(crate) mode: Mode,
    pub(crate) ttl: Option<Duration>,
    pub(crate) lease: Option<Duration>,
    pub(crate) scope: Option<Ident>,
    pub(crate) inputs: Vec<Input>,
    pub(crate) on_conflict: Option<OnConflict>,
    pub(crate) name: String,
    pub(crate) claim: Option<Ident>,
    pub(crate) krate: syn::Path,
}
