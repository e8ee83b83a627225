//! One list of decisions for logs and metrics: the operating guide names
//! exactly `idem_core::Decision`'s outcomes (the metric's values) and steps
//! (logged only), and no crate logs a decision by a word of its own.

use idem_core::Decision;

fn guide() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/guide/operating.md"
    ))
    .expect("docs/guide/operating.md")
}

/// The backticked words of `text` that are decisions' spelling (`a_b`).
fn words(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_metrics_table_names_exactly_the_outcomes() {
    let guide = guide();
    let row = guide
        .lines()
        .find(|l| l.starts_with("| `idem.decisions`"))
        .expect("the idem.decisions row");
    let listed = row
        .split("by how it ended:")
        .nth(1)
        .and_then(|r| r.split("; the logs'").next())
        .expect("the outcomes");
    let outcomes: Vec<&str> = Decision::ALL
        .iter()
        .filter(|d| d.is_outcome())
        .map(|d| d.as_str())
        .collect();
    assert_eq!(words(listed), outcomes);
}

#[test]
fn the_logs_paragraph_names_exactly_the_steps() {
    let guide = guide();
    let paragraph = guide
        .split("**Logs.**")
        .nth(1)
        .and_then(|p| p.split("\n\n").next())
        .expect("the Logs paragraph");
    let steps: Vec<&str> = Decision::ALL
        .iter()
        .filter(|d| !d.is_outcome())
        .map(|d| d.as_str())
        .collect();
    let named = words(
        paragraph
            .split("a step on the way:")
            .nth(1)
            .expect("the steps"),
    );
    assert_eq!(named, steps);
}

#[test]
fn no_crate_logs_a_decision_by_a_word_of_its_own() {
    let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates");
    let mut stack = vec![std::path::PathBuf::from(crates)];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read");
                for (n, line) in text.lines().enumerate() {
                    if line.contains("decision = \"") {
                        found.push(format!("{}:{}", path.display(), n + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "decisions spelled outside idem_core::Decision: {found:?}"
    );
}
