//! The house's rule: no source file of a crate holds more than 500 lines
//! besides its tests (a `#[cfg(test)] mod` at its end), so that each file
//! stays one concept a reader takes in at once.

use std::path::{Path, PathBuf};

const LIMIT: usize = 500;

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The lines of `text` before its tests module.
fn non_test_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let tests = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "));
    tests.unwrap_or(lines.len())
}

#[test]
fn no_source_file_of_a_crate_is_over_500_lines_besides_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut files = Vec::new();
    sources(&root.join("crates"), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
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
