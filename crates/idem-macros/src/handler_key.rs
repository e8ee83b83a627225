//! The rules of a handler's key and scope that come from the request's
//! headers: `key_required = false` and `scope = header("...")`.

use syn::LitStr;

use crate::attr::Args;

/// Rule: `key_required = false` is for a handler whose key comes from the
/// `Idempotency-Key` header, and a request without a key runs with no
/// claim to bind. Whether the key may be absent.
pub(crate) fn key_optional(args: &Args, handler: bool) -> syn::Result<bool> {
    let Some(required) = &args.key_required else {
        return Ok(false);
    };
    if !handler {
        return Err(syn::Error::new(
            required.keyword,
            "`key_required` is for handlers, whose key comes from the `Idempotency-Key` header; a function with `key = ...` always has its key: remove `key_required`",
        ));
    }
    if required.value.value {
        return Ok(false);
    }
    if args.key.is_some() {
        return Err(syn::Error::new(
            required.keyword,
            "`key_required = false` lets a request without an `Idempotency-Key` header run; with `key = ...` the key never comes from the header: remove one of them",
        ));
    }
    if let Some(claim) = &args.claim {
        return Err(syn::Error::new(
            claim.keyword,
            "with `key_required = false`, a request without a key runs without a claim, so `claim = ...` would have nothing to bind: remove one of them",
        ));
    }
    Ok(true)
}

/// Rule: `scope = header("...")` names a header, and only a handler has
/// one. The header's name.
pub(crate) fn scope_header(args: &Args, handler: bool) -> syn::Result<Option<LitStr>> {
    let Some(header) = &args.scope_header else {
        return Ok(None);
    };
    if !handler {
        return Err(syn::Error::new(
            header.keyword,
            "`scope = header(...)` takes the scope from a request header, and only a handler has one: name a parameter instead, such as `scope = \"tenant\"`",
        ));
    }
    let name = header.value.value();
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(syn::Error::new(
            header.value.span(),
            format!("`{name}` is not a header name: letters, digits and `-`, such as `scope = header(\"x-api-key\")`"),
        ));
    }
    Ok(Some(LitStr::new(
        &name.to_ascii_lowercase(),
        header.value.span(),
    )))
}
