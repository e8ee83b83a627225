//! The function's parameters as the rules see them: the names each binds,
//! and whether it is the router state.

use proc_macro2::Span;
use syn::spanned::Spanned as _;
use syn::{FnArg, Ident, Pat, Type};

/// A parameter as the rules see it.
pub(crate) struct Param {
    /// Every name bound by its pattern.
    pub(crate) bindings: Vec<Ident>,
    /// `State(..)`: the router state, never fingerprinted.
    pub(crate) is_state: bool,
}

fn collect_bindings(pat: &Pat, out: &mut Vec<Ident>) {
    match pat {
        Pat::Ident(p) => {
            out.push(p.ident.clone());
            if let Some((_, sub)) = &p.subpat {
                collect_bindings(sub, out);
            }
        }
        Pat::TupleStruct(p) => p.elems.iter().for_each(|e| collect_bindings(e, out)),
        Pat::Tuple(p) => p.elems.iter().for_each(|e| collect_bindings(e, out)),
        Pat::Struct(p) => p.fields.iter().for_each(|f| collect_bindings(&f.pat, out)),
        Pat::Reference(p) => collect_bindings(&p.pat, out),
        Pat::Type(p) => collect_bindings(&p.pat, out),
        Pat::Paren(p) => collect_bindings(&p.pat, out),
        Pat::Slice(p) => p.elems.iter().for_each(|e| collect_bindings(e, out)),
        _ => {}
    }
}

pub(crate) fn last_segment_is(path: &syn::Path, name: &str) -> bool {
    path.segments.last().is_some_and(|s| s.ident == name)
}

fn is_state(pat: &Pat, ty: &Type) -> bool {
    let by_pattern = matches!(pat, Pat::TupleStruct(p) if last_segment_is(&p.path, "State"));
    let by_type = matches!(ty, Type::Path(t) if last_segment_is(&t.path, "State"));
    by_pattern || by_type
}

pub(crate) fn binding_list(params: &[Param]) -> String {
    let names: Vec<String> = params
        .iter()
        .flat_map(|p| p.bindings.iter().map(|b| format!("`{b}`")))
        .collect();
    if names.is_empty() {
        "the function has no named parameters".into()
    } else {
        format!("the parameters are {}", names.join(", "))
    }
}

pub(crate) fn find<'a>(params: &'a [Param], name: &str) -> Option<(&'a Param, &'a Ident)> {
    params
        .iter()
        .find_map(|p| p.bindings.iter().find(|b| *b == name).map(|b| (p, b)))
}

/// The parameters, and the first one that cannot be an axum extractor (a
/// receiver or a reference).
pub(crate) fn params(sig: &syn::Signature) -> (Vec<Param>, Option<Span>) {
    let mut not_extractor = None;
    let mut params = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(r) => {
                not_extractor = not_extractor.or(Some(r.self_token.span));
            }
            FnArg::Typed(pt) => {
                if matches!(&*pt.ty, Type::Reference(_)) {
                    not_extractor = not_extractor.or(Some(pt.ty.span()));
                }
                let mut bindings = Vec::new();
                collect_bindings(&pt.pat, &mut bindings);
                params.push(Param {
                    bindings,
                    is_state: is_state(&pt.pat, &pt.ty),
                });
            }
        }
    }
    (params, not_extractor)
}
