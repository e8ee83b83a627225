//! Names no other test, process or run uses: key prefixes and schemas.

/// A key prefix no other test, process or run uses.
pub fn unique_prefix(label: &str) -> String {
    format!("idem-test:{label}:{}:", unique_suffix())
}

/// `<unix secs>_<nanos>_<pid>_<counter>`: unique across tests, processes
/// and runs, and starting with the time (stale schemas are found by it).
pub(crate) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}_{}_{}_{}",
        now.as_secs(),
        now.subsec_nanos(),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
