//! Compile-time behaviour of `#[idempotent]`: the supported shapes compile,
//! and every misuse is one clear error on the offending token
//! (`TRYBUILD=overwrite` regenerates the `.stderr` files; read the diff).
//!
//! The `.stderr` files are rustc's own words, which change between
//! releases: they are pinned to the toolchain this project tests with
//! ([`PINNED`]). On another toolchain the pass cases still run, and the
//! fail cases are skipped with a message saying so, instead of failing on
//! rustc's rewording; regenerate them with `TRYBUILD=overwrite` when moving
//! the pin.

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
    } else {
        eprintln!(
            "ui/fail skipped: its .stderr files are pinned to {PINNED}x, this is {}; \
             regenerate them with TRYBUILD=overwrite and move PINNED",
            version.trim()
        );
    }
}
