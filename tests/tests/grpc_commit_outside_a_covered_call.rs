//! A gRPC method that commits its transaction with
//! `idem_tonic::commit_with_record` outside a covered call (no layer, a
//! method the layer does not name, or no key where keys are optional)
//! commits at once; when that fails, its status says whether anything was
//! applied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use idem_core::MemoryStore;
use tonic::Code;

#[tokio::test]
async fn a_debit_that_conflicted_outside_idem_says_nothing_was_applied() {
    let store = MemoryStore::new();
    let mut tx = store.transaction();
    // What the debit read changed before its commit: the effect refuses.
    tx.apply("the balance of alice", || false);
    let status = idem_tonic::commit_with_record(tx)
        .await
        .expect_err("a conflict is no commit");
    assert_eq!(
        status.code(),
        Code::Aborted,
        "a concurrency conflict, for the client to retry: {status:?}"
    );
    assert!(
        status.message().contains("nothing was applied")
            && !status.message().contains("may or may not"),
        "says the writes did not happen: {}",
        status.message()
    );
}

#[tokio::test]
async fn a_debit_committed_outside_idem_is_applied() {
    let store = MemoryStore::new();
    let applied = Arc::new(AtomicBool::new(false));
    let mut tx = store.transaction();
    let flag = Arc::clone(&applied);
    tx.apply("the balance of alice", move || {
        flag.store(true, Ordering::SeqCst);
        true
    });
    idem_tonic::commit_with_record(tx)
        .await
        .expect("committed at once");
    assert!(applied.load(Ordering::SeqCst));
}
