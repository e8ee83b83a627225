//! Generates the code around the function. No decisions are made here: the
//! plan was checked by `validate`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::visit_mut::{self, VisitMut};
use syn::{parse_quote, Attribute, FnArg, Ident, ItemFn, Pat, ReturnType};

use crate::validate::{AxumMode, Mode, OnConflict, PlainMode, Plan};

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What both forms share: the runtime path, the call's policy overrides, the
/// scope, the fingerprint's inputs and the claim's binding.
struct Common {
    /// The runtime as the body names it: `__idem_p`, imported once.
    private: TokenStream,
    /// The runtime's path, for the signature and that one import.
    runtime: TokenStream,
    name: String,
    overrides: TokenStream,
    scope: TokenStream,
    checks: Vec<TokenStream>,
    adds: Vec<TokenStream>,
    claim: Option<Ident>,
    /// Whether `scope = ...` names a binding.
    scoped: bool,
}

fn common(plan: &Plan) -> Common {
    let krate = &plan.krate;
    let runtime = quote!(#krate::__private);
    let private = quote!(__idem_p);
    let ttl = plan.ttl.map(|d| {
        let n = nanos(d);
        quote!(.ttl(#private::Duration::from_nanos(#n)))
    });
    let lease = plan.lease.map(|d| {
        let n = nanos(d);
        quote!(.lease(#private::Duration::from_nanos(#n)))
    });
    let on_conflict = plan.on_conflict.as_ref().map(|c| match c {
        OnConflict::Reject => quote!(.on_in_flight(#private::OnInFlight::Reject)),
        OnConflict::Wait(d) => {
            let n = nanos(*d);
            quote!(.on_in_flight(#private::OnInFlight::Wait { max: #private::Duration::from_nanos(#n) }))
        }
    });
    let scope = plan.scope.as_ref().map_or_else(
        || quote!(#private::Scope::global()),
        |id| quote_spanned!(id.span()=> #private::ScopeValue::scope_value(&#id)),
    );
    // Each fingerprinted input is checked where the user wrote it.
    let checks = plan
        .inputs
        .iter()
        .map(|i| {
            let id = &i.ident;
            quote_spanned!(id.span()=> #private::fingerprintable(&#id);)
        })
        .collect();
    let adds = plan
        .inputs
        .iter()
        .map(|i| {
            let id = &i.ident;
            let label = id.to_string();
            quote!(#private::add_input(&mut __idem_builder, #label, &#id)?;)
        })
        .collect();
    Common {
        private,
        runtime,
        name: plan.name.clone(),
        overrides: quote!(#ttl #lease #on_conflict),
        scope,
        checks,
        adds,
        claim: plan.claim.clone(),
        scoped: plan.scope.is_some(),
    }
}

pub(crate) fn expand(plan: Plan, item: ItemFn) -> TokenStream {
    let c = common(&plan);
    match plan.mode {
        Mode::Axum(axum) => expand_axum(&c, &axum, item),
        Mode::Plain(parts) => expand_plain(&c, *parts, item),
    }
}

/// Whether an attribute is a lint level (`allow`, `warn`, ...), which both
/// the handler and the function holding the user's body get.
fn is_lint(attr: &Attribute) -> bool {
    ["allow", "warn", "deny", "forbid", "expect"]
        .iter()
        .any(|l| attr.path().is_ident(l))
}

/// Whether an attribute instruments the body (`#[tracing::instrument]`), which
/// belongs on the function with the user's parameters and body.
fn is_instrument(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "instrument")
}

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

/// The handler that axum routes, around the user's function.
struct Handler {
    /// Its signature: the context first, then the user's extractors renamed.
    signature: syn::Signature,
    /// The renamed extractors, in order.
    args: Vec<Ident>,
    /// Each fingerprinted extractor added to the fingerprint.
    adds: Vec<TokenStream>,
    /// The user's patterns bound by reference, for `key` and `scope`.
    bindings: Vec<TokenStream>,
}

fn handler(sig: &syn::Signature, axum: &AxumMode, runtime: &TokenStream) -> Handler {
    let p = quote!(__idem_p);
    let mut outer = sig.clone();
    outer.inputs = Punctuated::new();
    outer
        .inputs
        .push(parse_quote!(__idem_ctx: #runtime::HandlerContext));
    outer.output = parse_quote!(-> #runtime::Response);
    let mut args = Vec::new();
    let mut adds = Vec::new();
    let mut bindings = Vec::new();
    for (i, (input, skipped)) in sig.inputs.iter().zip(&axum.skipped).enumerate() {
        let FnArg::Typed(pt) = input else { continue };
        let arg = format_ident!("__idem_arg{i}");
        let (pattrs, ty) = (&pt.attrs, &pt.ty);
        outer.inputs.push(parse_quote!(#(#pattrs)* #arg: #ty));
        if !*skipped {
            let label = format!("#{i}");
            // The value is spanned at the parameter's type, so that a type
            // that cannot be fingerprinted is reported there.
            let value = Ident::new(&arg.to_string(), ty.span());
            adds.push(quote_spanned! {ty.span()=>
                let #arg = match { (&#p::tag(&#arg)).tag_kind() }
                    .add(#value, &__idem_ctx, &mut __idem_fp, #label)
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
    Handler {
        signature: outer,
        args,
        adds,
        bindings,
    }
}

/// An axum handler. The user's function stays whole, renamed `__idem_inner`
/// inside the handler; the handler around it extracts a `HandlerContext`
/// and the same extractors, fingerprints each extractor's whole value, and
/// runs the inner function once per key on a task of its own.
fn expand_axum(c: &Common, axum: &AxumMode, item: ItemFn) -> TokenStream {
    let Common {
        runtime,
        name,
        overrides,
        scope,
        claim,
        scoped,
        ..
    } = c;
    let p = quote!(__idem_p);
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let outer_attrs = attrs.iter().filter(|a| !is_instrument(a));
    let inner_attrs = attrs.iter().filter(|a| is_instrument(a) || is_lint(a));

    // In the handler, bindings are references: the scope is their value.
    let scope = match &axum.scope {
        Some(id) => quote_spanned!(id.span()=> #p::ScopeValue::scope_value(#id)),
        None => scope.clone(),
    };
    let Handler {
        signature: outer,
        args,
        adds,
        bindings,
    } = handler(&sig, axum, runtime);
    let states = axum
        .states
        .iter()
        .map(|s| quote_spanned!(s.span()=> #p::engine_in_state::<#s>();));
    let key = if let Some(expr) = &axum.key {
        quote_spanned!(expr.span()=> __idem_ctx.expression_key(&(#expr)))
    } else {
        quote!(__idem_ctx.header_key())
    };
    // Bindings are only needed by `key = ...` and `scope = ...`.
    let bindings = if axum.key.is_some() || *scoped {
        bindings
    } else {
        Vec::new()
    };

    // The user's function, unchanged but for its name and the claim.
    let mut inner = sig.clone();
    inner.ident = format_ident!("__idem_inner");
    let (claim_param, claim_arg) = match &claim {
        Some(claim) => {
            inner.inputs.push(parse_quote!(#claim: #p::Claim));
            (quote!(__idem_claim), quote!(__idem_claim))
        }
        None => (quote!(_), quote!()),
    };
    let call_inner = if sig.unsafety.is_some() {
        quote! {
            #[allow(unused_unsafe)]
            // SAFETY: the caller of the handler upholds what the user's
            // `unsafe fn` asks, as it would without the attribute.
            let __idem_out = unsafe { __idem_inner(#(#args,)* #claim_arg) };
        }
    } else {
        quote!(let __idem_out = __idem_inner(#(#args,)* #claim_arg);)
    };

    // A return type that is not a response is reported there, once.
    let ret_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => sig.ident.span(),
    };
    let respond =
        quote_spanned!(ret_span=> #p::HandlerResponse::into_handler_response(__idem_out.await));
    quote! {
        #(#outer_attrs)*
        #vis #outer {
            use #runtime as __idem_p;
            #[allow(unused_imports)]
            use __idem_p::{ViaKnown as _, ViaSerialize as _};

            #(#inner_attrs)*
            // Async for the handler's sake: an inner body without `.await`
            // is not the user's mistake.
            #[allow(clippy::too_many_arguments, clippy::unused_async)]
            #inner #block

            #(#states)*
            let __idem_ctx = __idem_ctx.operation(#name);
            let mut __idem_fp = __idem_ctx.builder();
            #(#adds)*
            // The bindings are references here: `&binding` in a key
            // expression is a needless borrow, not a mistake.
            #[allow(clippy::needless_borrow, clippy::needless_borrows_for_generic_args)]
            let (__idem_key, __idem_scope) = {
                #(#bindings)*
                (#key, #scope)
            };
            let __idem_key = match __idem_key {
                ::core::result::Result::Ok(key) => key,
                ::core::result::Result::Err(problem) => {
                    return #p::IntoResponse::into_response(problem);
                }
            };
            let __idem_call = #p::Call::new(__idem_scope, __idem_key, __idem_fp.finish()) #overrides;
            __idem_ctx
                .run(__idem_call, move |#claim_param| async move {
                    #call_inner
                    #respond
                })
                .await
        }
    }
}

/// Any other async function: `Result<T, E>` becomes `Result<Ran<T>, Error<E>>`.
/// The signature is kept as written (receiver, `unsafe`, generics,
/// attributes) but for its return type.
fn expand_plain(c: &Common, plain: PlainMode, item: ItemFn) -> TokenStream {
    let Common {
        private,
        runtime,
        name,
        overrides,
        scope,
        checks,
        adds,
        claim,
        ..
    } = c;
    let PlainMode {
        key,
        engine,
        ok,
        err,
    } = plain;
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = item;
    let unsafety = sig.unsafety.is_some();
    sig.output = parse_quote!(-> #runtime::Output<#ok, #err>);
    // The types are checked once each, where the user wrote them; the run
    // names them through the same traits, so a failure is not repeated.
    let ok_check = quote_spanned!(ok.span()=> #private::recordable::<#ok>(););
    let err_check = quote_spanned!(err.span()=> #private::recordable_failure::<#err>(););
    let run_call = quote_spanned!(ok.span()=> #private::run::<#ok, #err, _, _>);
    let engine_expr = quote_spanned!(engine.span()=> #private::AsEngine::as_engine(&(#engine)));
    let key_expr = quote_spanned!(key.span()=> #private::key_of(&(#key)));
    let claim = claim
        .clone()
        .unwrap_or_else(|| Ident::new("__idem_claim", Span::call_site()));
    let body = if unsafety {
        quote! {{
            #[allow(unused_unsafe)]
            // SAFETY: the caller of this `unsafe fn` upholds what it asks.
            let __idem_body = async move { unsafe #block };
            __idem_body.await
        }}
    } else {
        quote!(async move #block.await)
    };
    quote! {
        #(#attrs)*
        #vis #sig
        {
            use #runtime as __idem_p;
            #ok_check
            #err_check
            #(#checks)*
            let __idem_engine: #private::Engine = ::core::clone::Clone::clone(#engine_expr);
            let __idem_key = #key_expr.map_err(#private::Error::InvalidKey)?;
            let __idem_fingerprint = (|| -> ::core::result::Result<#private::Fingerprint, #private::FingerprintError> {
                let mut __idem_builder = #private::Fingerprint::builder(#name);
                #(#adds)*
                ::core::result::Result::Ok(__idem_builder.finish())
            })()
            .map_err(#private::Error::Fingerprint)?;
            let __idem_call = #private::Call::new(#scope, __idem_key, __idem_fingerprint) #overrides;
            #run_call(&__idem_engine, &__idem_call, move |#claim| async move {
                    let _ = &#claim;
                    let __idem_result: ::core::result::Result<#ok, #err> = #body;
                    __idem_result
                })
                .await
        }
    }
}
