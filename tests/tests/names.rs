//! The house rule: one meaning per name. A public type, trait or alias is
//! defined once in the workspace's crates; the same name in two crates is
//! allowed only where it is one role written once per framework (each web
//! adapter's layer, each SQL dialect's statements), listed below with the
//! role. Each crate's sources are parsed with `syn`; items inside a test
//! module or under `#[doc(hidden)]` modules count too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use idem_tests::rust_sources;

/// Names defined in more than one crate on purpose: the same role, once per
/// framework or dialect.
const PARALLELS: &[(&str, &str)] = &[
    (
        "Conflict",
        "what commit_response answers on each web adapter",
    ),
    (
        "HandlerContext",
        "the attribute's per-request support, per web adapter",
    ),
    (
        "HandlerRequest",
        "the attribute's per-request support, per web adapter",
    ),
    (
        "HandlerResponse",
        "the attribute's per-request support, per web adapter",
    ),
    (
        "HeaderKey",
        "the attribute's key from a header, per web adapter",
    ),
    (
        "OptionalHeaderKey",
        "the attribute's optional key, per web adapter",
    ),
    (
        "Fingerprintable",
        "the attribute's \"not Serialize\" diagnostic, per macro path",
    ),
    (
        "Idempotency",
        "the one builder; idem-actix's wraps idem-http's",
    ),
    (
        "IdempotencyLayer",
        "the tower layer, per tower adapter (axum, tonic)",
    ),
    (
        "IdempotencyService",
        "the tower service, per tower adapter (axum, tonic)",
    ),
    (
        "Problem",
        "idem's problem answer; idem-axum's wraps idem-http's",
    ),
    ("ProblemFormat", "how problems are written, per adapter"),
];

/// The public types, traits and aliases `items` define, with nested
/// modules'.
fn defined(items: &[syn::Item], out: &mut Vec<String>) {
    for item in items {
        let public = |vis: &syn::Visibility| matches!(vis, syn::Visibility::Public(_));
        match item {
            syn::Item::Struct(i) if public(&i.vis) => out.push(i.ident.to_string()),
            syn::Item::Enum(i) if public(&i.vis) => out.push(i.ident.to_string()),
            syn::Item::Trait(i) if public(&i.vis) => out.push(i.ident.to_string()),
            syn::Item::Type(i) if public(&i.vis) => out.push(i.ident.to_string()),
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    defined(inner, out);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn each_public_name_has_one_meaning_across_the_workspace() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name else { continue };
        for file in rust_sources(&dir.join("src")) {
            let text = std::fs::read_to_string(&file).expect("source");
            let parsed = syn::parse_file(&text).expect("parses");
            let mut names = Vec::new();
            defined(&parsed.items, &mut names);
            for n in names {
                let crates = by_name.entry(n).or_default();
                if !crates.contains(&name) {
                    crates.push(name.clone());
                }
            }
        }
    }
    let twice: Vec<String> = by_name
        .iter()
        .filter(|(n, crates)| crates.len() > 1 && !PARALLELS.iter().any(|(p, _)| p == n))
        .map(|(n, crates)| format!("{n}: {}", crates.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public names defined in two crates with two meanings (rename one, or list \
         the name in PARALLELS with the one role it plays in each):\n{}",
        twice.join("\n")
    );
    let stale: Vec<&str> = PARALLELS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| by_name.get(*n).is_none_or(|c| c.len() < 2))
        .collect();
    assert!(
        stale.is_empty(),
        "PARALLELS lists names no longer in two crates: {stale:?}"
    );
}
