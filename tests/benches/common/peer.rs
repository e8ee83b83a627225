//! The strongest Rust peer, the `idempotent` crate's tower layer
//! (`tests/peer-idempotent`), built and started as its own process: the
//! same payments debit route as idem's, on its memory store or on Redis.
//!
//! The crate is outside the workspace (its dependency declares
//! rust-version 1.98 and builds on 1.95 with `--ignore-rust-version`), so
//! the workspace's build and CI never compile it; this module builds it
//! into `target/peer` when a peer pair runs.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running peer server; killed when dropped.
pub(crate) struct Peer {
    child: Child,
    /// Its base URL (`http://127.0.0.1:<port>`).
    pub(crate) url: String,
}

impl Peer {
    /// Builds the peer (once; cargo knows when it is fresh) and starts it
    /// with `args` (`memory`, or `redis <url> <prefix>`).
    pub(crate) fn start(args: &[&str]) -> Result<Self, String> {
        let binary = build()?;
        let mut child = Command::new(&binary)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("the peer has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading the peer's address: {e}"))?;
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            return Err(format!("the peer did not start: {line:?}"));
        };
        Ok(Self {
            url: url.to_owned(),
            child,
        })
    }

    /// Its process id, for its CPU time.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cargo build --release` of `tests/peer-idempotent` into `target/peer`;
/// the binary's path.
fn build() -> Result<PathBuf, String> {
    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = tests.join("peer-idempotent/Cargo.toml");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| tests.join("../target"), PathBuf::from)
        .join("peer");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--release", "--ignore-rust-version"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .map_err(|e| format!("cannot run cargo to build the peer: {e}"))?;
    if !status.success() {
        return Err(format!("building {} failed", manifest.display()));
    }
    Ok(target.join("release/peer-idempotent"))
}
