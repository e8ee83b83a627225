//! Which web framework a handler is written for, told from the names in its
//! signature, so that the attribute of the other framework (or of
//! `idem_core`) is refused with one error naming the right crate instead of
//! failing on every extractor.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;

use crate::attr::Args;
use crate::plan::Origin;

/// A web framework with an `#[idempotent]` of its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Framework {
    Axum,
    Actix,
}

impl Framework {
    /// The crate whose attribute makes this framework's handlers.
    pub(crate) fn attribute(self) -> &'static str {
        match self {
            Framework::Axum => "idem_axum::idempotent",
            Framework::Actix => "idem_actix::idempotent",
        }
    }

    /// The framework's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Framework::Axum => "axum",
            Framework::Actix => "actix-web",
        }
    }

    /// The crate the handler form is generated against.
    pub(crate) fn adapter(self) -> &'static str {
        match self {
            Framework::Axum => "idem_axum",
            Framework::Actix => "idem_actix",
        }
    }
}

/// Names only one framework's handlers use. Those marked `true` count only
/// when generic or destructured (`State<App>`, `State(app)`), not as the
/// name of a type of the user's own (`Json<State>`).
const AXUM: &[(&str, bool)] = &[
    ("axum", false),
    ("IntoResponse", false),
    ("IntoResponseParts", false),
    ("State", true),
    ("Extension", true),
];
const ACTIX: &[(&str, bool)] = &[
    ("actix_web", false),
    ("HttpResponse", false),
    ("HttpRequest", false),
    ("HttpResponseBuilder", false),
    ("Responder", false),
    ("Data", true),
    ("ReqData", true),
];

fn marks(list: &[(&str, bool)], name: &str, applied: bool) -> bool {
    list.iter()
        .any(|(mark, needs_args)| *mark == name && (applied || !needs_args))
}

/// The framework the signature's types and patterns name, and the first
/// name that says so; `None` when they name neither or both.
pub(crate) fn written_for(sig: &syn::Signature) -> Option<(Framework, String, Span)> {
    let mut found: Option<(Framework, String, Span)> = None;
    let mut both = false;
    let mut tokens = sig.inputs.to_token_stream();
    sig.output.to_tokens(&mut tokens);
    visit(tokens, &mut |ident: &proc_macro2::Ident, applied: bool| {
        let name = ident.to_string();
        let framework = if marks(AXUM, &name, applied) {
            Framework::Axum
        } else if marks(ACTIX, &name, applied) {
            Framework::Actix
        } else {
            return;
        };
        match &found {
            None => found = Some((framework, name, ident.span())),
            Some((f, _, _)) if *f != framework => both = true,
            Some(_) => {}
        }
    });
    if both {
        None
    } else {
        found
    }
}

/// Calls `f` with every identifier and whether it is applied: followed by
/// `<` (generic arguments) or `(` (a tuple-struct pattern).
fn visit(tokens: TokenStream, f: &mut impl FnMut(&proc_macro2::Ident, bool)) {
    let mut tokens = tokens.into_iter().peekable();
    while let Some(t) = tokens.next() {
        match t {
            TokenTree::Ident(id) => {
                let applied = match tokens.peek() {
                    Some(TokenTree::Punct(p)) => p.as_char() == '<',
                    Some(TokenTree::Group(g)) => {
                        g.delimiter() == proc_macro2::Delimiter::Parenthesis
                    }
                    _ => false,
                };
                f(&id, applied);
            }
            TokenTree::Group(g) => visit(g.stream(), f),
            _ => {}
        }
    }
}

/// Rule, for the handler form (no `engine = ...`): the attribute is the one
/// of the framework the handler is written for, and `crate = ...` names
/// that framework's adapter. One error, alone: every other would follow
/// from this one.
pub(crate) fn check_framework(
    origin: Origin,
    args: &Args,
    sig: &syn::Signature,
) -> syn::Result<()> {
    let own = match origin {
        Origin::Axum => Some(Framework::Axum),
        Origin::Actix => Some(Framework::Actix),
        Origin::Core => None,
    };
    if let Some((written, name, span)) = written_for(sig) {
        if Some(written) != own {
            let this = match origin {
                Origin::Core => "`idem_core::idempotent` makes functions that are not handlers (with `engine = ...` and `key = ...`)",
                Origin::Axum => "`idem_axum::idempotent` makes axum handlers",
                Origin::Actix => "`idem_actix::idempotent` makes actix-web handlers",
            };
            return Err(syn::Error::new(
                span,
                format!(
                    "this is an {} handler (it names `{name}`), and {this}: use `{}`",
                    written.name(),
                    written.attribute()
                ),
            ));
        }
    }
    if let (Some(own), Some(krate)) = (own, &args.krate) {
        let path = krate.value.value();
        let last = path.rsplit("::").next().unwrap_or("").trim();
        if ["idem_core", "idem_axum", "idem_actix"].contains(&last) && last != own.adapter() {
            return Err(syn::Error::new(
                krate.value.span(),
                format!(
                    "`crate = \"{path}\"` names a crate without the {} handler form, which `{}` generates its code against: write `crate = \"::{}\"`, or the path where you re-export `{}`",
                    own.name(),
                    own.attribute(),
                    own.adapter(),
                    own.adapter()
                ),
            ));
        }
    }
    Ok(())
}
