//! Calls and claims made directly on a store, as a holder outside the
//! engine would.

use std::time::Duration;

use idem_core::{Begin, Lease, Store};

/// A call of operation `op` under `key` in `scope`, fingerprinting the key.
pub fn call(scope: &str, key: &str) -> idem_core::Call {
    idem_core::Call::new(
        scope,
        idem_core::IdempotencyKey::parse(key).expect("a valid key"),
        idem_core::Fingerprint::of("op", &key).expect("fingerprint"),
    )
}

/// Claims `call`'s record directly on `store`, as a holder outside the engine
/// would; panics if the record is not free.
pub async fn claim(store: &dyn Store, call: &idem_core::Call, lease: Duration) -> Lease {
    match store
        .begin(call.record_id(), call.fingerprint(), lease)
        .await
    {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!(
            "the record of {:?} must be free to claim, got {other:?}",
            call.key()
        ),
    }
}
