//! The README stays true: its quick start is the example the test command
//! builds, its links lead to files that exist, and it stays short enough
//! to read in five minutes.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_readme_s_quick_start_is_the_example_that_is_built() {
    let readme = read("README.md");
    let example = read("examples/quickstart/main.rs");
    let start = readme
        .find("<!-- quickstart -->\n```rust\n")
        .map(|i| i + "<!-- quickstart -->\n```rust\n".len())
        .expect("the README marks its quick start with <!-- quickstart -->");
    let end = readme[start..]
        .find("```\n<!-- /quickstart -->")
        .map(|i| start + i)
        .expect("the quick start ends with <!-- /quickstart -->");
    assert_eq!(
        &readme[start..end],
        example,
        "the README's quick start differs from examples/quickstart/main.rs"
    );
}

#[test]
fn a_newcomer_reads_the_readme_in_five_minutes() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 250,
        "the README has {lines} lines; the guide is for the rest"
    );
}

#[test]
fn every_relative_link_of_the_readme_and_the_guide_leads_to_a_file() {
    let mut pages = vec![
        PathBuf::from("README.md"),
        PathBuf::from("docs/benchmarks.md"),
    ];
    let guide = std::fs::read_dir(root().join("docs/guide")).expect("docs/guide");
    for entry in guide.flatten() {
        pages.push(Path::new("docs/guide").join(entry.file_name()));
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(&page.to_string_lossy());
        let dir = page.parent().unwrap_or(Path::new(""));
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(close) = rest.find(')') else {
                continue;
            };
            let target = &rest[..close];
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains("://") || file.contains(' ') {
                continue;
            }
            if !root().join(dir).join(file).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}
