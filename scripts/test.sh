#!/usr/bin/env bash
# The project's one test command: formatting, lints, every test (unit,
# conformance, property, end to end, doc tests) and the runnable examples.
set -euo pipefail
cd "$(dirname "$0")/.."

# A build from nothing takes about 5 GB (8 with incremental caches; CI
# builds without): warn at once rather than leave a full disk to the linker.
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt $((5 * 1024 * 1024)) ]; then
    echo "test.sh: warning: only $((free_kb / 1024)) MB free here; a build from nothing needs about 5 GB" >&2
fi

scripts/services.sh

echo "==> cargo fmt --all --check"
cargo fmt --all --check

echo "==> cargo clippy --workspace --all-targets --all-features -- -D warnings"
cargo clippy --workspace --all-targets --all-features -- -D warnings

echo "==> build the examples (the crash test runs the payments binary)"
cargo build --workspace --examples

echo "==> tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --all-features --no-fail-fast
else
    cargo test --workspace --all-features --no-fail-fast --lib --bins --tests
fi

echo "==> doc tests"
cargo test --workspace --all-features --doc

echo "==> docs build without a broken link (RUSTDOCFLAGS=-D warnings cargo doc)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --all-features

echo "==> example: queue_consumer (in-memory broker and store)"
cargo run --quiet --example queue_consumer

echo "==> example: queue_consumer (Redis Stream consumer group, RedisStore)"
REDIS_URL=redis://127.0.0.1:6379 cargo run --quiet --example queue_consumer

echo "==> cargo package: every crate builds from what it would publish"
# Cargo takes a crate it verified before from its build directory when the
# version is unchanged, even if the sources changed since: forget those
# builds (the workspace's own crates only; their dependencies stay built).
# (In the build directory cargo uses: `CARGO_TARGET_DIR` if set.)
target="${CARGO_TARGET_DIR:-target}"
rm -rf "$target/package" "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/idem-* \
    "$target"/debug/.fingerprint/idem-* "$target"/debug/deps/libidem_* "$target"/debug/deps/idem_*
cargo package --workspace --allow-dirty --exclude idem-examples --exclude idem-tests --exclude idem-ui-tests
rm -rf "$target/package"

echo "==> all green"
