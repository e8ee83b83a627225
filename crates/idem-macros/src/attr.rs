//! Parses the arguments of `#[idempotent(...)]` into a typed struct that
//! keeps each keyword's span.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token};

mod kw {
    syn::custom_keyword!(ttl);
    syn::custom_keyword!(lease);
    syn::custom_keyword!(scope);
    syn::custom_keyword!(key);
    syn::custom_keyword!(engine);
    syn::custom_keyword!(skip);
    syn::custom_keyword!(on_conflict);
    syn::custom_keyword!(name);
    syn::custom_keyword!(claim);
    syn::custom_keyword!(key_required);
    syn::custom_keyword!(header);
}

/// Every argument the attribute takes, for error messages.
pub(crate) const EXPECTED: &str =
    "expected one of: ttl, lease, scope, key, key_required, engine, skip, on_conflict, name, claim, crate";

/// A `name = value` argument, with the span of its keyword.
pub(crate) struct Spanned<T> {
    pub(crate) keyword: Span,
    pub(crate) value: T,
}

/// The parsed arguments.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) ttl: Option<Spanned<LitStr>>,
    pub(crate) lease: Option<Spanned<LitStr>>,
    pub(crate) scope: Option<Spanned<LitStr>>,
    /// `scope = header("x-api-key")`: the header's name.
    pub(crate) scope_header: Option<Spanned<LitStr>>,
    pub(crate) key_required: Option<Spanned<syn::LitBool>>,
    pub(crate) key: Option<Spanned<Expr>>,
    pub(crate) engine: Option<Spanned<Expr>>,
    pub(crate) skip: Option<Spanned<Vec<Ident>>>,
    pub(crate) on_conflict: Option<Spanned<LitStr>>,
    pub(crate) name: Option<Spanned<LitStr>>,
    pub(crate) claim: Option<Spanned<Ident>>,
    pub(crate) krate: Option<Spanned<LitStr>>,
}

/// Stores `value` in `slot`, refusing a second one with the span on it.
fn set_once<T>(
    slot: &mut Option<Spanned<T>>,
    keyword: Span,
    what: &str,
    value: T,
) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(
            keyword,
            format!("`{what}` is given twice; keep one `{what} = ...`"),
        ));
    }
    *slot = Some(Spanned { keyword, value });
    Ok(())
}

/// Parses `= <string literal>`, saying what the string should hold.
fn string_value(input: ParseStream<'_>, what: &str, example: &str) -> syn::Result<LitStr> {
    input.parse::<Token![=]>()?;
    if input.peek(LitStr) {
        return input.parse();
    }
    let wrong: Expr = input.parse()?;
    Err(syn::Error::new_spanned(
        wrong,
        format!("`{what}` takes a string literal, such as `{what} = {example}`"),
    ))
}

/// `scope = "binding"` or `scope = header("name")`, after the keyword.
fn parse_scope(input: ParseStream<'_>, args: &mut Args, k: Span) -> syn::Result<()> {
    if args.scope.is_some() || args.scope_header.is_some() {
        return Err(syn::Error::new(
            k,
            "`scope` is given twice; keep one `scope = ...`",
        ));
    }
    if !input.peek2(kw::header) {
        let v = string_value(input, "scope", "\"account\"")?;
        return set_once(&mut args.scope, k, "scope", v);
    }
    input.parse::<Token![=]>()?;
    input.parse::<kw::header>()?;
    let content;
    syn::parenthesized!(content in input);
    let name: LitStr = content.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "`header` takes the header's name as a string, such as `scope = header(\"x-api-key\")`",
        )
    })?;
    set_once(&mut args.scope_header, k, "scope", name)
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            let lookahead = input.lookahead1();
            if lookahead.peek(kw::ttl) {
                let k = input.parse::<kw::ttl>()?.span;
                let v = string_value(input, "ttl", "\"24h\"")?;
                set_once(&mut args.ttl, k, "ttl", v)?;
            } else if lookahead.peek(kw::lease) {
                let k = input.parse::<kw::lease>()?.span;
                let v = string_value(input, "lease", "\"60s\"")?;
                set_once(&mut args.lease, k, "lease", v)?;
            } else if lookahead.peek(kw::scope) {
                let k = input.parse::<kw::scope>()?.span;
                parse_scope(input, &mut args, k)?;
            } else if lookahead.peek(kw::key_required) {
                let k = input.parse::<kw::key_required>()?.span;
                input.parse::<Token![=]>()?;
                let v: syn::LitBool = input.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`key_required` takes `true` or `false`, such as `key_required = false`",
                    )
                })?;
                set_once(&mut args.key_required, k, "key_required", v)?;
            } else if lookahead.peek(kw::key) {
                let k = input.parse::<kw::key>()?.span;
                input.parse::<Token![=]>()?;
                let v: Expr = input.parse()?;
                set_once(&mut args.key, k, "key", v)?;
            } else if lookahead.peek(kw::engine) {
                let k = input.parse::<kw::engine>()?.span;
                input.parse::<Token![=]>()?;
                let v: Expr = input.parse()?;
                set_once(&mut args.engine, k, "engine", v)?;
            } else if lookahead.peek(kw::skip) {
                let k = input.parse::<kw::skip>()?.span;
                if !input.peek(syn::token::Paren) {
                    return Err(input.error(
                        "`skip` takes the names of the parameters to leave out of the fingerprint, in parentheses: `skip(pool, client)`",
                    ));
                }
                let content;
                syn::parenthesized!(content in input);
                let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                if let Some(first) = &args.skip {
                    let all: Vec<String> = first
                        .value
                        .iter()
                        .chain(&names)
                        .map(ToString::to_string)
                        .collect();
                    return Err(syn::Error::new(
                        k,
                        format!(
                            "`skip` is given twice; list every name in one: `skip({})`",
                            all.join(", ")
                        ),
                    ));
                }
                set_once(&mut args.skip, k, "skip", names.into_iter().collect())?;
            } else if lookahead.peek(kw::on_conflict) {
                let k = input.parse::<kw::on_conflict>()?.span;
                let v = string_value(input, "on_conflict", "\"wait(5s)\"")?;
                set_once(&mut args.on_conflict, k, "on_conflict", v)?;
            } else if lookahead.peek(kw::name) {
                let k = input.parse::<kw::name>()?.span;
                let v = string_value(input, "name", "\"ship-order\"")?;
                set_once(&mut args.name, k, "name", v)?;
            } else if lookahead.peek(kw::claim) {
                let k = input.parse::<kw::claim>()?.span;
                input.parse::<Token![=]>()?;
                let v: Ident = input.parse().map_err(|e| {
                    syn::Error::new(e.span(), "`claim` takes a name for the claim inside the body, such as `claim = claim`")
                })?;
                set_once(&mut args.claim, k, "claim", v)?;
            } else if lookahead.peek(Token![crate]) {
                let k = input.parse::<Token![crate]>()?.span;
                let v = string_value(input, "crate", "\"::idem_core\"")?;
                set_once(&mut args.krate, k, "crate", v)?;
            } else if input.peek(Ident) {
                let unknown: Ident = input.parse()?;
                return Err(syn::Error::new(
                    unknown.span(),
                    format!("unknown argument `{unknown}`; {EXPECTED}"),
                ));
            } else {
                return Err(lookahead.error());
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}
