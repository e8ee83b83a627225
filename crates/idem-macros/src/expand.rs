//! Generates the code around the function. No decisions are made here: the
//! plan was checked by `validate`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Ident, ItemFn, ReturnType};

use crate::validate::{Mode, OnConflict, PlainMode, Plan};

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What both forms share: the runtime path, the call's policy overrides, the
/// scope, the fingerprint's inputs and the claim's binding.
struct Common {
    private: TokenStream,
    name: String,
    overrides: TokenStream,
    scope: TokenStream,
    checks: Vec<TokenStream>,
    adds: Vec<TokenStream>,
    claim: Ident,
}

fn common(plan: &Plan) -> Common {
    let krate = &plan.krate;
    let private = quote!(#krate::__private);
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
        name: plan.name.clone(),
        overrides: quote!(#ttl #lease #on_conflict),
        scope,
        checks,
        adds,
        claim: plan
            .claim
            .clone()
            .unwrap_or_else(|| Ident::new("__idem_claim", Span::call_site())),
    }
}

pub(crate) fn expand(plan: Plan, item: ItemFn) -> TokenStream {
    let c = common(&plan);
    match plan.mode {
        Mode::Axum => expand_axum(&c, item),
        Mode::Plain(parts) => expand_plain(&c, *parts, item),
    }
}

/// An axum handler: the `Idempotent` extractor comes first, the response is
/// recorded by idem-axum.
fn expand_axum(c: &Common, item: ItemFn) -> TokenStream {
    let Common {
        private,
        name,
        overrides,
        scope,
        checks,
        adds,
        claim,
    } = c;
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let (ident, generics, inputs, asyncness) =
        (&sig.ident, &sig.generics, &sig.inputs, &sig.asyncness);
    let where_clause = &sig.generics.where_clause;
    let ret = match &sig.output {
        ReturnType::Type(_, ty) => quote!(#ty),
        ReturnType::Default => quote!(()),
    };
    quote! {
        #(#attrs)*
        #vis #asyncness fn #ident #generics (__idem_ctx: #private::Idempotent, #inputs) -> #private::Response #where_clause {
            #(#checks)*
            let __idem_ctx = __idem_ctx.operation(#name) #overrides;
            let __idem_call = (|| -> ::core::result::Result<#private::Call, #private::FingerprintError> {
                let mut __idem_builder = __idem_ctx.fingerprint_builder();
                #(#adds)*
                ::core::result::Result::Ok(__idem_ctx.call_with(#scope, __idem_builder.finish()))
            })();
            match __idem_call {
                ::core::result::Result::Ok(__idem_call) => {
                    __idem_ctx
                        .run_call(__idem_call, move |#claim| async move {
                            let _ = &#claim;
                            let __idem_result: #ret = async move #block.await;
                            #private::IntoResponse::into_response(__idem_result)
                        })
                        .await
                }
                ::core::result::Result::Err(__idem_error) => #private::fingerprint_failed(&__idem_error),
            }
        }
    }
}

/// Any other async function: `Result<T, E>` becomes `Result<Ran<T>, Error<E>>`.
fn expand_plain(c: &Common, plain: PlainMode, item: ItemFn) -> TokenStream {
    let Common {
        private,
        name,
        overrides,
        scope,
        checks,
        adds,
        claim,
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
        sig,
        block,
    } = item;
    let (ident, generics, inputs, asyncness) =
        (&sig.ident, &sig.generics, &sig.inputs, &sig.asyncness);
    let where_clause = &sig.generics.where_clause;
    let ok_check = quote_spanned!(ok.span()=> #private::recordable::<#ok>(););
    let err_check = quote_spanned!(err.span()=> #private::recordable_failure::<#err>(););
    let engine_expr = quote_spanned!(engine.span()=> #private::AsEngine::as_engine(&(#engine)));
    let key_expr = quote_spanned!(key.span()=> #private::key_of(&(#key)));
    quote! {
        #(#attrs)*
        #vis #asyncness fn #ident #generics (#inputs)
            -> ::core::result::Result<#private::Ran<#ok>, #private::Error<#err>> #where_clause
        {
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
            __idem_engine
                .run(&__idem_call, move |#claim| async move {
                    let _ = &#claim;
                    let __idem_result: ::core::result::Result<#ok, #err> = async move #block.await;
                    __idem_result
                })
                .await
        }
    }
}
