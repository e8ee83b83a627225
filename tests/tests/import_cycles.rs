//! The house rule: no import cycles between the files of a crate. Each
//! crate's sources are parsed with `syn`; every path that names another
//! file's module (`crate::a::b`, `super::c`, in `use` items and in code)
//! is an edge from the file that writes it to the file of the longest
//! module prefix it names; the crate root (`lib.rs`), which declares and
//! re-exports every module, is left out. A cycle fails the test, listed
//! file by file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use idem_tests::rust_sources;
use syn::visit::Visit;

/// A module path from the crate root: `["memory", "shard"]`.
type ModPath = Vec<String>;

/// Every file of a crate's `src`, by its module path.
fn files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    for path in rust_sources(src) {
        let relative = path.strip_prefix(src).unwrap_or(&path).with_extension("");
        let mut module: ModPath = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|l| l == "mod") {
            module.pop();
        }
        if module == ["lib"] || module == ["main"] {
            module.clear();
        }
        out.insert(module, path);
    }
    out
}

/// Collects the module paths a file names.
struct Names<'a> {
    modules: &'a BTreeMap<ModPath, PathBuf>,
    /// The module the visitor is in (the file's, plus inline modules).
    here: ModPath,
    /// The file's own module.
    file: ModPath,
    found: BTreeSet<ModPath>,
}

impl Names<'_> {
    /// Resolves `segments` (as written, from `crate`, `super` or `self`)
    /// and records the file it lands in.
    fn named(&mut self, segments: &[String]) {
        let mut path = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("super" | "self") => self.here.clone(),
            _ => return,
        };
        for s in segments {
            match s.as_str() {
                "crate" | "self" => {}
                "super" => {
                    path.pop();
                }
                other => path.push(other.to_owned()),
            }
        }
        while !path.is_empty() && !self.modules.contains_key(&path) {
            path.pop();
        }
        if !path.is_empty() && path != self.file {
            self.found.insert(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.named(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.named(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.named(&prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.named(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.here.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.here.pop();
        }
    }
}

/// The import graph of the crate whose sources are in `src`: file to the
/// files it names.
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let modules = files(src);
    let mut graph = BTreeMap::new();
    for (module, path) in &modules {
        if module.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("read a source file");
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut names = Names {
            modules: &modules,
            here: module.clone(),
            file: module.clone(),
            found: BTreeSet::new(),
        };
        names.visit_file(&file);
        graph.insert(module.clone(), names.found);
    }
    graph
}

/// One cycle of `graph`, if it has any, as the files around it.
fn a_cycle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    fn walk(
        node: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        done: &mut BTreeSet<ModPath>,
        path: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = walk(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| walk(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_file_of_any_crate_imports_a_file_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut cycles = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/").flatten() {
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        if let Some(cycle) = a_cycle(&graph(&src)) {
            let files: Vec<String> = cycle
                .iter()
                .map(|m| format!("{}.rs", m.join("/")))
                .collect();
            cycles.push(format!(
                "{}: {}",
                entry.file_name().to_string_lossy(),
                files.join(" -> ")
            ));
        }
    }
    cycles.sort();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn a_cycle_is_found_and_named() {
    let dir = std::env::temp_dir().join(format!("idem-cycles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).expect("dirs");
    std::fs::write(src.join("lib.rs"), "mod a; mod b; pub use a::A;").expect("lib");
    std::fs::write(src.join("a.rs"), "use crate::b::c::C; pub struct A(C);").expect("a");
    std::fs::write(src.join("b.rs"), "pub mod c;").expect("b");
    std::fs::write(
        src.join("b/c.rs"),
        "pub struct C; mod inner { fn f() -> super::super::super::a::A { todo!() } }",
    )
    .expect("c");
    let cycle = a_cycle(&graph(&src));
    let _ = std::fs::remove_dir_all(&dir);
    let cycle = cycle.expect("a -> b/c -> a");
    assert_eq!(cycle.len(), 3, "{cycle:?}");
    assert!(cycle.contains(&vec!["a".to_owned()]));
    assert!(cycle.contains(&vec!["b".to_owned(), "c".to_owned()]));
}
