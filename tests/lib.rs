//! Cross-crate tests of idem. The tests live in `tests/*.rs` of this package.
