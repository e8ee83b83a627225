//! Checks the arguments against the function, one rule per function, and
//! produces the validated plan that `expand` turns into code.

use std::time::Duration;

use proc_macro2::Span;
use syn::spanned::Spanned as _;
use syn::{Expr, GenericArgument, Ident, ItemFn, LitStr, PathArguments, ReturnType, Type};

use crate::attr::Args;
use crate::framework::check_framework;
use crate::handler_key;
use crate::params::{binding_list, find, last_segment_is, params, Param};
use crate::plan::{HandlerMode, Input, Mode, OnConflict, Origin, PlainMode, Plan};

/// `Result<T, E>`, by its last path segment.
fn result_types(ret: &ReturnType) -> Option<(Type, Type)> {
    let ReturnType::Type(_, ty) = ret else {
        return None;
    };
    let Type::Path(tp) = &**ty else { return None };
    let last = tp.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut types = args.args.iter().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    Some((types.next()?, types.next()?))
}

/// Parses a duration string, with an error on the literal that says what to write.
fn duration(what: &str, lit: &LitStr) -> syn::Result<Duration> {
    let text = lit.value();
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!("`{text}` is not a duration ({e}); write `{what} = \"24h\"`, `\"7d\"`, `\"30s\"` or `\"500ms\"`"),
        )
    })?;
    if d.is_zero() {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{what}` must be longer than zero, such as `{what} = \"30s\"`"),
        ));
    }
    Ok(d)
}

fn on_conflict(lit: &LitStr) -> syn::Result<OnConflict> {
    let text = lit.value();
    let text = text.trim();
    if text == "reject" {
        return Ok(OnConflict::Reject);
    }
    if let Some(inner) = text.strip_prefix("wait(").and_then(|t| t.strip_suffix(')')) {
        let inner_lit = LitStr::new(inner, lit.span());
        return match duration("on_conflict", &inner_lit) {
            Ok(d) => Ok(OnConflict::Wait(d)),
            Err(_) if humantime::parse_duration(inner.trim()).is_ok_and(|d| d.is_zero()) => {
                Err(syn::Error::new(
                    lit.span(),
                    "`wait(...)` must wait longer than zero, such as `on_conflict = \"wait(5s)\"`; for no wait write `on_conflict = \"reject\"`",
                ))
            }
            Err(_) => {
                let why = humantime::parse_duration(inner.trim())
                    .err()
                    .map_or_else(String::new, |e| format!(" ({e})"));
                Err(syn::Error::new(
                    lit.span(),
                    format!("`wait({inner})` needs a duration inside{why}, such as `on_conflict = \"wait(5s)\"`"),
                ))
            }
        };
    }
    Err(syn::Error::new(
        lit.span(),
        format!("`on_conflict = \"{text}\"` is not understood; write `on_conflict = \"reject\"` or `on_conflict = \"wait(5s)\"`"),
    ))
}

/// Collects the errors of every rule, so that all are reported at once.
#[derive(Default)]
struct Errors(Vec<syn::Error>);

impl Errors {
    fn push(&mut self, e: syn::Error) {
        self.0.push(e);
    }

    /// The value, or `None` with its error kept.
    fn keep<T>(&mut self, r: syn::Result<T>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    fn finish(self) -> syn::Result<()> {
        let mut errors = self.0.into_iter();
        match errors.next() {
            None => Ok(()),
            Some(mut combined) => {
                errors.for_each(|e| combined.combine(e));
                Err(combined)
            }
        }
    }
}

/// Rule: the function is `async`.
fn check_async(sig: &syn::Signature) -> syn::Result<()> {
    if sig.asyncness.is_some() {
        return Ok(());
    }
    Err(syn::Error::new(
        sig.fn_token.span(),
        "`#[idempotent]` needs an `async fn`: write `async fn`",
    ))
}

/// Rule: `lease` is shorter than `ttl` when both are given.
fn check_lease_within_ttl(
    ttl: Option<Duration>,
    lease: Option<Duration>,
    lease_lit: Option<&LitStr>,
) -> syn::Result<()> {
    match (ttl, lease, lease_lit) {
        (Some(t), Some(l), Some(lit)) if l >= t => Err(syn::Error::new(
            lit.span(),
            format!(
                "`lease` ({}) must be shorter than `ttl` ({}): a claim cannot outlive the record it guards",
                humantime::format_duration(l),
                humantime::format_duration(t)
            ),
        )),
        _ => Ok(()),
    }
}

/// Rule: `scope` names a parameter binding.
fn check_scope(scope: &LitStr, params: &[Param]) -> syn::Result<Ident> {
    let name = scope.value();
    find(params, &name).map(|(_, ident)| ident.clone()).ok_or_else(|| {
        syn::Error::new(
            scope.span(),
            format!(
                "`scope = \"{name}\"` names no parameter; {}. Name the parameter whose value owns the keys",
                binding_list(params)
            ),
        )
    })
}

/// Rule: each `skip` names a parameter binding.
fn check_skip(name: &Ident, params: &[Param]) -> syn::Result<()> {
    match find(params, &name.to_string()) {
        Some(_) => Ok(()),
        None => Err(syn::Error::new(
            name.span(),
            format!(
                "`skip({name})` names no parameter; {}",
                binding_list(params)
            ),
        )),
    }
}

/// Rule: `name` is not empty.
fn check_name(name: Option<&LitStr>, function: &Ident) -> syn::Result<String> {
    match name {
        Some(lit) if lit.value().trim().is_empty() => Err(syn::Error::new(
            lit.span(),
            "`name` must not be empty: write `name = \"ship-order\"`",
        )),
        Some(lit) => Ok(lit.value()),
        None => Ok(function.to_string()),
    }
}

/// Rule: `claim` does not hide a parameter.
fn check_claim(claim: &Ident, params: &[Param]) -> syn::Result<()> {
    if find(params, &claim.to_string()).is_some() {
        return Err(syn::Error::new(
            claim.span(),
            format!("`claim = {claim}` would hide the parameter `{claim}`; choose another name"),
        ));
    }
    Ok(())
}

/// Rules for a function that is not an axum handler (`engine = ...` given):
/// `key` and a `Result<T, E>` return.
fn check_plain(
    origin: Origin,
    args: &Args,
    sig: &syn::Signature,
    errors: &mut Errors,
) -> Option<Mode> {
    let handler = origin.handler();
    let key = args.key.as_ref().map(|k| k.value.clone());
    let engine = args.engine.as_ref().map(|e| e.value.clone());
    if key.is_none() && result_types(&sig.output).is_none() {
        // No key and no `Result`: most likely an axum handler given an engine.
        let span = args.engine.as_ref().map_or(sig.ident.span(), |e| e.keyword);
        errors.push(syn::Error::new(
            span,
            format!("`engine = ...` makes a function that is not {handler}, with `key = ...` and a `Result` return. For {handler}, remove `engine = ...`: the engine comes from {}", match origin {
                Origin::Actix => "the app data (`App::new().app_data(engine.clone())`)",
                Origin::Axum | Origin::Core => "the router state (`Engine: FromRef<S>`)",
            }),
        ));
        return None;
    }
    if key.is_none() {
        let span = args.engine.as_ref().map_or(sig.ident.span(), |e| e.keyword);
        errors.push(syn::Error::new(
            span,
            format!("with `engine = ...`, `#[idempotent]` makes a function that is not {handler}, which needs the key: add `key = <expression>`, such as `key = msg.id`"),
        ));
    }
    let types = result_types(&sig.output);
    if let Some((_, err)) = &types {
        if matches!(err, Type::Path(tp) if last_segment_is(&tp.path, "Infallible")) {
            errors.push(syn::Error::new(
                err.span(),
                "`Infallible` cannot be recorded (it is not `Serialize`): write `idem_core::Never`, the error type of an operation that cannot fail",
            ));
            return None;
        }
    }
    if types.is_none() {
        let span = match &sig.output {
            ReturnType::Type(_, ty) => ty.span(),
            ReturnType::Default => sig.ident.span(),
        };
        errors.push(syn::Error::new(
            span,
            format!("the result of an `#[idempotent]` function that is not {handler} is recorded: return `Result<T, E>`, with `T: Serialize + DeserializeOwned` and `E: idem_core::Failure + Serialize + DeserializeOwned`"),
        ));
    }
    match (key, engine, types) {
        (Some(key), Some(engine), Some((ok, err))) => Some(Mode::Plain(Box::new(PlainMode {
            key,
            engine,
            ok,
            err,
        }))),
        _ => None,
    }
}

/// The rule that picks the form, for `origin`'s handlers: with
/// `engine = ...` the item is a function (a queue consumer, a method),
/// otherwise a handler, whose parameters are all extractors.
fn form_rule(origin: Origin) -> String {
    let engine = match origin {
        Origin::Actix => "the app data",
        Origin::Axum | Origin::Core => "the router state",
    };
    format!(
        "without `engine = ...`, `#[idempotent]` makes {} (the engine from {engine}, the key from the `Idempotency-Key` header or `key = ...`)",
        origin.handler()
    )
}

/// Rule: a handler's parameters are extractors, not receivers or
/// references; on actix-web, where the fingerprint is the request itself,
/// nothing is skipped.
fn check_handler(
    origin: Origin,
    args: &Args,
    params: &[Param],
    skipped: &[Ident],
    not_extractor: Option<Span>,
) -> syn::Result<Mode> {
    if let Some(span) = not_extractor {
        return Err(syn::Error::new(
            span,
            format!("{}, and {} cannot take `self` or a reference. For a function that is not a handler, add `engine = <expression>` and `key = <expression>`, such as `#[idempotent(engine = self.engine, key = msg.id)]`", form_rule(origin), origin.handler()),
        ));
    }
    if let (Origin::Actix, Some(skip)) = (origin, &args.skip) {
        return Err(syn::Error::new(
            skip.keyword,
            "`skip` has nothing to leave out on an actix-web handler: its fingerprint is the request itself (method, route, path, query and body), not the extracted values; remove `skip(...)`",
        ));
    }
    let scope = args.scope.as_ref().and_then(|s| {
        let name = s.value.value();
        find(params, &name).map(|(_, ident)| ident.clone())
    });
    Ok(Mode::Handler(Box::new(HandlerMode {
        origin,
        key: args.key.as_ref().map(|k| k.value.clone()),
        scope,
        scope_header: handler_key::scope_header(args, true)?,
        key_optional: handler_key::key_optional(args, true)?,
        skipped: params
            .iter()
            .map(|p| p.bindings.iter().any(|b| skipped.contains(b)))
            .collect(),
    })))
}

/// Rule: the attribute is given once.
fn check_once(item: &ItemFn) -> syn::Result<()> {
    match item
        .attrs
        .iter()
        .find(|a| last_segment_is(a.path(), "idempotent"))
    {
        Some(again) => Err(syn::Error::new_spanned(
            again,
            "`#[idempotent]` is given twice on this function; keep one",
        )),
        None => Ok(()),
    }
}

/// Rule: `crate` is a path.
fn check_crate(krate: Option<&LitStr>, origin: Origin) -> syn::Result<syn::Path> {
    let default = match origin {
        Origin::Axum => "::idem_axum",
        Origin::Actix => "::idem_actix",
        Origin::Core => "::idem_core",
    };
    match krate {
        Some(lit) => lit.parse::<syn::Path>().map_err(|_| {
            syn::Error::new(
                lit.span(),
                format!(
                    "`crate = \"{}\"` is not a path; write a path such as `crate = \"{default}\"`",
                    lit.value()
                ),
            )
        }),
        None => syn::parse_str::<syn::Path>(default),
    }
}

/// The bindings that go into the fingerprint: all but `skip`ped ones and
/// the parameter that `engine = <name>` names, and on an axum handler (no
/// `engine = ...`) all but the router state. A parameter of the function
/// form whose type is named `State` is an argument like any other (a
/// workflow's state, say): fingerprinted, or refused where written if it
/// cannot be, with a note naming `skip`.
fn fingerprinted(params: &[Param], skipped: &[Ident], engine: Option<&Expr>) -> Vec<Input> {
    let engine_param = engine.and_then(|e| match e {
        Expr::Path(p) => p.path.get_ident().cloned(),
        _ => None,
    });
    params
        .iter()
        .filter(|p| engine.is_some() || !p.is_state)
        .flat_map(|p| p.bindings.iter())
        .filter(|b| !skipped.iter().any(|s| s == *b))
        .filter(|b| engine_param.as_ref() != Some(*b))
        .map(|ident| Input {
            ident: ident.clone(),
        })
        .collect()
}

/// Checks every rule and builds the plan; all errors found are returned together.
pub(crate) fn validate(origin: Origin, args: &Args, item: &ItemFn) -> syn::Result<Plan> {
    let sig = &item.sig;
    if args.engine.is_none() {
        check_framework(origin, args, sig)?;
    }
    let mut errors = Errors::default();
    errors.keep(check_once(item));
    errors.keep(check_async(sig));
    let (params, not_extractor) = params(sig);

    let ttl = args
        .ttl
        .as_ref()
        .and_then(|s| errors.keep(duration("ttl", &s.value)));
    let lease = args
        .lease
        .as_ref()
        .and_then(|s| errors.keep(duration("lease", &s.value)));
    errors.keep(check_lease_within_ttl(
        ttl,
        lease,
        args.lease.as_ref().map(|s| &s.value),
    ));
    let on_conflict = args
        .on_conflict
        .as_ref()
        .and_then(|s| errors.keep(on_conflict(&s.value)));
    let scope = args
        .scope
        .as_ref()
        .and_then(|s| errors.keep(check_scope(&s.value, &params)));
    let skipped: Vec<Ident> = args
        .skip
        .as_ref()
        .map(|s| s.value.clone())
        .unwrap_or_default();
    // On actix-web, `skip` itself is refused (`check_handler`).
    if origin != Origin::Actix {
        for name in &skipped {
            errors.keep(check_skip(name, &params));
        }
    }
    let name = errors.keep(check_name(args.name.as_ref().map(|s| &s.value), &sig.ident));
    let claim = args.claim.as_ref().map(|c| c.value.clone());
    if let Some(c) = &claim {
        errors.keep(check_claim(c, &params));
    }
    if origin == Origin::Core || args.engine.is_some() {
        errors.keep(handler_key::key_optional(args, false));
        errors.keep(handler_key::scope_header(args, false));
    }
    let mode = if origin == Origin::Core && args.engine.is_none() {
        errors.push(syn::Error::new(
            sig.ident.span(),
            format!("`idem_core::idempotent` makes a function that is not an axum handler (a queue consumer, a method), which needs the engine{}: add `engine = <expression>`, such as `#[idempotent(engine = self.engine, key = msg.id)]`. For a handler, use `idem_axum::idempotent` (axum) or `idem_actix::idempotent` (actix-web)", if args.key.is_none() { " and the key" } else { "" }),
        ));
        None
    } else if args.engine.is_some() {
        check_plain(origin, args, sig, &mut errors)
    } else {
        errors.keep(check_handler(
            origin,
            args,
            &params,
            &skipped,
            not_extractor,
        ))
    };
    let krate = errors.keep(check_crate(args.krate.as_ref().map(|s| &s.value), origin));
    let inputs = fingerprinted(&params, &skipped, args.engine.as_ref().map(|e| &e.value));

    errors.finish()?;
    match (mode, krate, name) {
        (Some(mode), Some(krate), Some(name)) => Ok(Plan {
            mode,
            ttl,
            lease,
            scope,
            inputs,
            on_conflict,
            name,
            claim,
            krate,
        }),
        _ => Err(syn::Error::new(
            Span::call_site(),
            "`#[idempotent]`: invalid arguments",
        )),
    }
}
