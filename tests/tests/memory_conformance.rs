//! The store conformance kit against `MemoryStore`.

idem_core::store_conformance_tests!(|| async { idem_core::MemoryStore::new() });

/// The same kit through a store with a small byte bound (just over the kit's
/// largest outcome, 1 MiB) and few shards, so that expiry on access and the
/// purge are exercised by every check, and the bound by the largest.
mod small {
    idem_core::store_conformance_tests!(|| async {
        idem_core::MemoryStore::builder()
            .max_bytes(2 << 20)
            .shards(2)
            .purge_interval(Some(std::time::Duration::from_millis(50)))
            .build()
    });
}

/// The one-call form of the kit, for stores that prefer a single test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_check_in_one_run() {
    idem_core::testing::run_all(|| async { idem_core::MemoryStore::new() }).await;
}
