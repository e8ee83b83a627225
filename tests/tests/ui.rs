//! Compile-time behaviour of `#[idempotent]`: the supported shapes compile,
//! and every misuse is one clear error on the offending token
//! (`TRYBUILD=overwrite` regenerates the `.stderr` files; read the diff).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
