//! Generates the code around the function. No decisions are made here: the
//! plan was checked by `validate`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::visit_mut::{self, VisitMut};
use syn::{parse_quote, Attribute, FnArg, Ident, ItemFn, Pat, ReturnType};

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
struct Handler {
    /// Its signature: the context first, then (axum) the user's extractors
    /// renamed.
    signature: syn::Signature,
    /// actix-web: each of the user's extractors extracted from the context,
    /// which holds the whole request (actix-web's extractors take the body
    /// when they are made, so the context could not read it first), then
    /// the engine looked for among them if the app data held none.
    extracts: Vec<TokenStream>,
    /// The renamed extractors, in order.
    args: Vec<Ident>,
    /// Each fingerprinted extractor added to the fingerprint.
    adds: Vec<TokenStream>,
    /// The user's patterns bound by reference, for `key` and `scope`.
    bindings: Vec<TokenStream>,
}

fn handler(sig: &syn::Signature, axum: &HandlerMode, runtime: &TokenStream) -> Handler {
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
        outer
            .inputs
            .push(parse_quote!(__idem_header_key: #runtime::HeaderKey));
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
    let scope = match &axum.scope {
        Some(id) => quote_spanned!(id.span()=> #p::ScopeValue::scope_value(#id)),
        None => scope.clone(),
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
    } = inner(&sig, &block, claim.as_ref(), &args, p);
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
    let block = if let Some(claim) = claim {
        quote!({
            let #claim: #p::Claim = #p::take_claim();
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
