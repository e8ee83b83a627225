//! Generates the code around the function. No decisions are made here: the
//! plan was checked by `validate`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{parse_quote, Attribute, Ident, ItemFn, ReturnType};

use crate::handler::{handler, Handler};
use crate::plan::{HandlerMode, Mode, OnConflict, Origin, PlainMode, Plan};

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What both forms share: the runtime path, the call's policy overrides, the
/// scope, the fingerprint's inputs and the claim's binding.
struct Common {
    /// The runtime's path. The generated code names it by path only, never
    /// through a `use`: a wrong `crate = "..."` then fails the same way at
    /// every use, on the same token, and rustc reports it once.
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
    let private = &runtime;
    let ttl = plan.ttl.map(|d| {
        let n = nanos(d);
        quote!(.ttl(::core::time::Duration::from_nanos(#n)))
    });
    let lease = plan.lease.map(|d| {
        let n = nanos(d);
        quote!(.lease(::core::time::Duration::from_nanos(#n)))
    });
    let on_conflict = plan.on_conflict.as_ref().map(|c| match c {
        OnConflict::Reject => quote!(.on_in_flight(#private::OnInFlight::Reject)),
        OnConflict::Wait(d) => {
            let n = nanos(*d);
            quote!(.on_in_flight(#private::OnInFlight::Wait { max: ::core::time::Duration::from_nanos(#n) }))
        }
    });
    let scope = plan.scope.as_ref().map_or_else(
        || quote!(#private::global_scope()),
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
        Mode::Handler(handler) => expand_handler(&c, &handler, item),
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

/// Whether an attribute is axum's `#[debug_handler]`, which checks the
/// user's own signature and so goes on the function that keeps it.
fn is_debug_handler(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "debug_handler")
}

/// An axum handler. The user's function stays whole, renamed `__idem_inner`
/// inside the handler; the handler around it extracts a `HandlerContext`
/// and the same extractors, fingerprints each extractor's whole value, and
/// runs the inner function once per key on a task of its own.
fn expand_handler(c: &Common, axum: &HandlerMode, item: ItemFn) -> TokenStream {
    let Common {
        runtime,
        name,
        overrides,
        scope,
        claim,
        scoped,
        ..
    } = c;
    let p = runtime;
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let outer_attrs = attrs
        .iter()
        .filter(|a| !is_instrument(a) && !is_debug_handler(a));
    let inner_attrs = attrs
        .iter()
        .filter(|a| is_instrument(a) || is_debug_handler(a) || is_lint(a));
    // In the handler, bindings are references: the scope is their value.
    let scope = match (&axum.scope, &axum.scope_header) {
        (Some(id), _) => quote_spanned!(id.span()=> #p::ScopeValue::scope_value(#id)),
        (None, Some(name)) => quote!(#p::header_scope(&__idem_scope_request, #name)),
        (None, None) => scope.clone(),
    };
    let Handler {
        signature: outer,
        extracts,
        args,
        adds,
        bindings,
    } = handler(&sig, axum, runtime);
    // The tags that pick how each extractor is fingerprinted (axum only).
    let import_tags = (axum.origin != Origin::Actix).then(|| quote!(#runtime::import_tags!();));
    let key = if let Some(expr) = &axum.key {
        quote_spanned!(expr.span()=> __idem_ctx.request().expression_key(&(#expr)))
    } else {
        quote!(__idem_header_key.into_key())
    };
    // Bindings are only needed by `key = ...` and `scope = ...`.
    let bindings = if axum.key.is_some() || *scoped {
        bindings
    } else {
        Vec::new()
    };
    let Inner {
        item: inner,
        call: call_inner,
        claim_param,
        beside,
    } = inner(&sig, &block, claim.as_ref(), axum.scope.as_ref(), &args, p);
    // Async for the handler's sake: an inner body without `.await` is not
    // the user's mistake.
    let inner = quote! {
        #(#inner_attrs)*
        #[allow(clippy::too_many_arguments, clippy::unused_async)]
        #inner
    };
    let (inner_beside, inner_inside) = if beside {
        (Some(quote!(#[doc(hidden)] #inner)), None)
    } else {
        (None, Some(inner))
    };

    // A return type that is not a response is reported there, once.
    let ret_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => sig.ident.span(),
    };
    let respond =
        quote_spanned!(ret_span=> #p::HandlerResponse::into_handler_response(__idem_out.await));
    let (key_arms, scope_refused) = crate::handler::refusals(axum, p, &call_inner, &respond);
    quote! {
        #inner_beside

        #(#outer_attrs)*
        #vis #outer {
            #import_tags

            #inner_inside

            let __idem_ctx = __idem_ctx.operation(#name);
            #(#extracts)*
            #[allow(unused_mut)]
            let mut __idem_fp = __idem_ctx.request().builder();
            #(#adds)*
            // The bindings are references here: `&binding` in a key
            // expression is a needless borrow, not a mistake.
            #[allow(clippy::needless_borrow, clippy::needless_borrows_for_generic_args)]
            let (__idem_key, __idem_scope) = {
                #(#bindings)*
                (#key, #scope)
            };
            let __idem_key = match __idem_key {
                #key_arms
                ::core::result::Result::Err(problem) => {
                    return #p::IntoResponse::into_response(problem);
                }
            };
            #scope_refused
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

/// The user's function inside the handler, and how the handler calls it.
struct Inner {
    item: TokenStream,
    /// `let __idem_out = ...;`: the call, with the claim if asked for.
    call: TokenStream,
    /// The operation's parameter: the claim, or `_`.
    claim_param: TokenStream,
    /// Whether the item goes beside the handler (an associated function
    /// named `__idem_inner_<handler>`) rather than inside it.
    beside: bool,
}

/// The user's function, unchanged but for its name; with `claim = ...` its
/// body first takes the claim the handler runs it with, so that its
/// signature stays the user's (for `#[debug_handler]`, say).
fn inner(
    sig: &syn::Signature,
    block: &syn::Block,
    claim: Option<&Ident>,
    scope: Option<&Ident>,
    args: &[Ident],
    p: &TokenStream,
) -> Inner {
    let mut inner = sig.clone();
    // A function that names `Self` is an associated function (a handler in
    // an `impl` block): its body is kept beside the handler, as an
    // associated function of the same type, since a function nested in the
    // handler could not name `Self`. Any other stays nested in the handler,
    // out of the caller's namespace.
    let beside = mentions_self(quote!(#sig #block));
    let (ident, path) = if beside {
        let ident = format_ident!("__idem_inner_{}", sig.ident);
        (ident.clone(), quote!(Self::#ident))
    } else {
        (format_ident!("__idem_inner"), quote!(__idem_inner))
    };
    inner.ident = ident;
    // A parameter that only names the scope is used by the handler, not
    // by the body: not an unused variable of the user's.
    let scope_used = scope.map(|id| quote!(let _ = &#id;));
    let block = if let Some(claim) = claim {
        quote!({
            #scope_used
            let #claim: #p::Claim = #p::take_claim();
            #block
        })
    } else if scope_used.is_some() {
        quote!({
            #scope_used
            #block
        })
    } else {
        quote!(#block)
    };
    let call = if sig.unsafety.is_some() {
        quote! {
            #[allow(unused_unsafe)]
            // SAFETY: the caller of the handler upholds what the user's
            // `unsafe fn` asks, as it would without the attribute.
            unsafe { #path(#(#args),*) }
        }
    } else {
        quote!(#path(#(#args),*))
    };
    if claim.is_some() {
        Inner {
            item: quote!(#inner #block),
            call: quote!(let __idem_out = #p::with_claim(__idem_claim, #call);),
            claim_param: quote!(__idem_claim),
            beside,
        }
    } else {
        Inner {
            item: quote!(#inner #block),
            call: quote!(let __idem_out = #call;),
            claim_param: quote!(_),
            beside,
        }
    }
}

/// Whether `tokens` name `Self` anywhere.
fn mentions_self(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(id) => id == "Self",
        proc_macro2::TokenTree::Group(g) => mentions_self(g.stream()),
        _ => false,
    })
}

/// Any other async function: `Result<T, E>` becomes `Result<Ran<T>, Error<E>>`.
/// The signature is kept as written (receiver, `unsafe`, generics,
/// attributes) but for its return type.
fn expand_plain(c: &Common, plain: PlainMode, item: ItemFn) -> TokenStream {
    let Common {
        runtime,
        name,
        overrides,
        scope,
        checks,
        adds,
        claim,
        ..
    } = c;
    let private = runtime;
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
    // Each type's codec is made where the user wrote the type, which is
    // where a type that cannot be recorded is reported; the run bounds
    // neither, so the failure is not repeated.
    let ok_codec = quote_spanned!(ok.span()=> let __idem_ok = #private::recordable::<#ok>(););
    let err_codec =
        quote_spanned!(err.span()=> let __idem_err = #private::recordable_failure::<#err>(););
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
            #ok_codec
            #err_codec
            #(#checks)*
            let __idem_engine: #private::Engine = ::core::clone::Clone::clone(#engine_expr);
            let __idem_key = #key_expr.map_err(#private::invalid_key)?;
            let __idem_fingerprint = (|| -> ::core::result::Result<#private::Fingerprint, #private::FingerprintError> {
                let mut __idem_builder = #private::Fingerprint::builder(#name);
                #(#adds)*
                ::core::result::Result::Ok(__idem_builder.finish())
            })()
            .map_err(#private::fingerprint_error)?;
            let __idem_call = #private::Call::new(#scope, __idem_key, __idem_fingerprint)
                .with_operation(#name) #overrides;
            #private::run(&__idem_engine, &__idem_call, __idem_ok, __idem_err, move |#claim| async move {
                    let _ = &#claim;
                    let __idem_result: ::core::result::Result<#ok, #err> = #body;
                    __idem_result
                })
                .await
        }
    }
}
