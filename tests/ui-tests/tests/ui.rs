//! Compile-time behaviour of `#[idempotent]`: the supported shapes compile,
//! and every misuse is one clear error on the offending token
//! (`TRYBUILD=overwrite` regenerates the `.stderr` files; read the diff).
//!
//! The `.stderr` files are rustc's own words, which change between
//! releases: they are pinned to the toolchain this project tests with
//! ([`PINNED`]). On another toolchain the test fails, saying so, rather
//! than skipping the fail cases in silence: regenerate them with
//! `TRYBUILD=overwrite` when moving the pin, or set
//! `IDEM_UI_SKIP_FAIL_CASES=1` to run only the pass cases knowingly.

/// The rustc release the `.stderr` files were written with.
const PINNED: &str = "rustc 1.95.";

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    let version = rustc_version();
    if version.starts_with(PINNED) {
        t.compile_fail("ui/fail/*.rs");
    } else if std::env::var_os("IDEM_UI_SKIP_FAIL_CASES").is_some() {
        eprintln!("ui/fail skipped (IDEM_UI_SKIP_FAIL_CASES): they are pinned to {PINNED}x");
    } else {
        panic!(
            "ui/fail's .stderr files are pinned to {PINNED}x, this is {}: regenerate them \
             with TRYBUILD=overwrite and move PINNED, or set IDEM_UI_SKIP_FAIL_CASES=1 \
             to run only the pass cases",
            version.trim()
        );
    }
}
