//! The handler the framework routes, around the user's function: its
//! signature (the key, the context, the extractors), and what it does with
//! each extractor before the call.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::visit_mut::{self, VisitMut};
use syn::{parse_quote, FnArg, Ident, Pat};

use crate::plan::{HandlerMode, Origin};

/// A pattern that binds the same names by reference to the value: `mut`,
/// `ref` and `ref mut` go, so that default binding modes apply.
fn by_reference(pat: &Pat) -> Pat {
    struct StripModes;
    impl VisitMut for StripModes {
        fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
            p.mutability = None;
            p.by_ref = None;
            visit_mut::visit_pat_ident_mut(self, p);
        }
    }
    let mut pat = pat.clone();
    StripModes.visit_pat_mut(&mut pat);
    pat
}

/// The handler that the framework routes, around the user's function.
pub(crate) struct Handler {
    /// Its signature: the context first, then (axum) the user's extractors
    /// renamed.
    pub(crate) signature: syn::Signature,
    /// actix-web: each of the user's extractors extracted from the context,
    /// which holds the whole request (actix-web's extractors take the body
    /// when they are made, so the context could not read it first), then
    /// the engine looked for among them if the app data held none.
    pub(crate) extracts: Vec<TokenStream>,
    /// The renamed extractors, in order.
    pub(crate) args: Vec<Ident>,
    /// Each fingerprinted extractor added to the fingerprint.
    pub(crate) adds: Vec<TokenStream>,
    /// The user's patterns bound by reference, for `key` and `scope`.
    pub(crate) bindings: Vec<TokenStream>,
}

pub(crate) fn handler(sig: &syn::Signature, axum: &HandlerMode, runtime: &TokenStream) -> Handler {
    let p = runtime;
    let mut outer = sig.clone();
    // Generic over the router state, which must hold an engine: a router
    // without one is told so where it routes the handler. In argument
    // position, so that a generic handler's turbofish stays the user's.
    outer.inputs = Punctuated::new();
    // A key from the header is required first: before the context (which
    // reads the body on actix-web) and the user's extractors (axum runs
    // them in order; the last may read the body), so that a request without
    // one is refused before its body is read.
    if axum.key.is_none() {
        outer.inputs.push(if axum.key_optional {
            parse_quote!(__idem_header_key: #runtime::OptionalHeaderKey)
        } else {
            parse_quote!(__idem_header_key: #runtime::HeaderKey)
        });
    }
    // The headers a scope is named by, read like the key's.
    if axum.scope_header.is_some() {
        outer.inputs.push(match axum.origin {
            Origin::Actix => parse_quote!(__idem_scope_request: #runtime::HttpRequest),
            Origin::Axum | Origin::Core => parse_quote!(__idem_scope_request: #runtime::HeaderMap),
        });
    }
    outer.inputs.push(match axum.origin {
        // actix-web's app data is not typed: the engine is looked up there.
        Origin::Actix => parse_quote!(__idem_ctx: #runtime::HandlerContext),
        Origin::Axum | Origin::Core => parse_quote!(
            __idem_ctx: #runtime::HandlerContext<impl #runtime::EngineInState>
        ),
    });
    outer.output = parse_quote!(-> #runtime::Response);
    let mut args = Vec::new();
    let mut extracts = Vec::new();
    let mut adds = Vec::new();
    let mut bindings = Vec::new();
    for (i, (input, skipped)) in sig.inputs.iter().zip(&axum.skipped).enumerate() {
        let FnArg::Typed(pt) = input else { continue };
        let arg = format_ident!("__idem_arg{i}");
        let (pattrs, ty) = (&pt.attrs, &pt.ty);
        if axum.origin == Origin::Actix {
            // The fingerprint is the request itself: nothing to add.
            extracts.push(quote_spanned! {ty.span()=>
                let #arg: #ty = match __idem_ctx.extract::<#ty>().await {
                    ::core::result::Result::Ok(v) => v,
                    ::core::result::Result::Err(answer) => return answer,
                };
            });
        } else {
            outer.inputs.push(parse_quote!(#(#pattrs)* #arg: #ty));
        }
        if !*skipped && axum.origin != Origin::Actix {
            let label = format!("#{i}");
            // The value is spanned at the parameter's type, so that a type
            // that cannot be fingerprinted is reported there.
            let value = Ident::new(&arg.to_string(), ty.span());
            adds.push(quote_spanned! {ty.span()=>
                let #arg = match { (&#p::tag(&#arg)).tag_kind() }
                    .add(#value, __idem_ctx.request(), &mut __idem_fp, #label)
                    .await
                {
                    ::core::result::Result::Ok(v) => v,
                    ::core::result::Result::Err(answer) => return answer,
                };
            });
        }
        let pat = by_reference(&pt.pat);
        bindings.push(quote! {
            #[allow(unused_variables, clippy::used_underscore_binding)]
            let #pat = &#arg;
        });
        args.push(arg);
    }
    if axum.origin == Origin::Actix {
        // An engine the app data does not hold may be in a parameter's
        // `web::Data<S>`, `S: AsRef<Engine>`.
        extracts.push(quote! {
            let __idem_ctx = {
                #[allow(unused_imports)]
                use #p::{EngineInData as _, NoEngine as _};
                __idem_ctx.engine_from([#((&&#p::EngineProbe(&#args)).engine()),*])
            };
        });
    }
    Handler {
        signature: outer,
        extracts,
        args,
        adds,
        bindings,
    }
}

/// The match arms that take the key (with `key_required = false`, a request
/// without one runs as it would without the attribute), and the refusal of
/// a header that names no scope (as a malformed key is refused).
pub(crate) fn refusals(
    axum: &HandlerMode,
    p: &TokenStream,
    call_inner: &TokenStream,
    respond: &TokenStream,
) -> (TokenStream, Option<TokenStream>) {
    let key_arms = if axum.key_optional {
        quote! {
            ::core::result::Result::Ok(::core::option::Option::None) => {
                #call_inner
                return __idem_ctx.unclaimed(#respond);
            }
            ::core::result::Result::Ok(::core::option::Option::Some(key)) => key,
        }
    } else {
        quote!(::core::result::Result::Ok(key) => key,)
    };
    let scope_refused = axum.scope_header.as_ref().map(|_| {
        quote! {
            let __idem_scope = match __idem_scope {
                ::core::result::Result::Ok(scope) => scope,
                ::core::result::Result::Err(problem) => {
                    return #p::IntoResponse::into_response(problem);
                }
            };
        }
    });
    (key_arms, scope_refused)
}
