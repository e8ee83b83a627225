//! The house's rule: no source file of a crate, an example, a benchmark or
//! the tests' support holds more than 500 lines besides its tests (a
//! `#[cfg(test)] mod` at its end), so that each file stays one concept a
//! reader takes in at once. (Test files themselves are exempt: a story
//! each, as long as its stories.)

use std::path::{Path, PathBuf};

use idem_tests::rust_sources;

const LIMIT: usize = 500;

/// The lines of `text` before its tests module.
fn non_test_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let tests = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "));
    tests.unwrap_or(lines.len())
}

#[test]
fn no_source_file_is_over_500_lines_besides_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut files = Vec::new();
    for dir in ["crates", "examples", "tests/benches", "tests/support"] {
        files.extend(rust_sources(&root.join(dir)));
    }
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut over: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            let n = non_test_lines(&text);
            (n > LIMIT).then(|| format!("{}: {n}", f.strip_prefix(&root).unwrap_or(f).display()))
        })
        .collect();
    over.sort();
    assert!(
        over.is_empty(),
        "over {LIMIT} lines besides tests:\n{}",
        over.join("\n")
    );
}

/// Whether `line`, at the top level of a crate root, defines something
/// (rather than declaring a module, re-exporting, or documenting).
fn defines(line: &str) -> bool {
    let words = [
        "fn ",
        "async fn ",
        "struct ",
        "enum ",
        "impl ",
        "impl<",
        "trait ",
        "const ",
        "static ",
        "type ",
        "macro_rules!",
    ];
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    words.iter().any(|w| rest.starts_with(w))
}

#[test]
fn crate_roots_only_declare_modules_and_re_export() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut roots: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map(|d| d.flatten().map(|e| e.path().join("src/lib.rs")).collect())
        .unwrap_or_default();
    roots.retain(|r| r.exists());
    assert!(roots.len() >= 10, "found only {} crate roots", roots.len());
    let mut defining = Vec::new();
    for lib in &roots {
        // Rust wants a proc-macro crate's entry points in its root.
        if lib.to_string_lossy().contains("idem-macros") {
            continue;
        }
        let text = std::fs::read_to_string(lib).unwrap_or_default();
        let lines = &text.lines().collect::<Vec<_>>()[..non_test_lines(&text)];
        for (n, line) in lines.iter().enumerate() {
            if defines(line) {
                let at = lib.strip_prefix(&root).unwrap_or(lib).display();
                defining.push(format!("{at}:{}: {line}", n + 1));
            }
        }
    }
    assert!(
        defining.is_empty(),
        "crate roots define things (move each into a file named after it):\n{}",
        defining.join("\n")
    );
}
