//! Cross-crate tests of idem; the tests live in `tests/*.rs` of this package.
//! This library holds what they share: serving a router on a real socket,
//! and a store that is down.

use std::time::Duration;

use idem_core::{async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, Store, StoreError};

/// Serves `router` on 127.0.0.1 at a free port; returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("server");
    });
    format!("http://{addr}")
}

/// A store whose backend cannot be reached: every call fails as a real
/// client's would on a refused connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct DownStore;

fn refused(what: &str) -> StoreError {
    StoreError::unavailable(
        format!("{what}: cannot reach the store"),
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
    )
}

#[async_trait]
impl Store for DownStore {
    async fn begin(&self, _: &RecordId, _: &Fingerprint, _: Duration) -> Result<Begin, StoreError> {
        Err(refused("begin"))
    }
    async fn complete(
        &self,
        _: &RecordId,
        _: &Lease,
        _: &Outcome,
        _: Duration,
    ) -> Result<(), StoreError> {
        Err(refused("complete"))
    }
    async fn release(&self, _: &RecordId, _: &Lease) -> Result<(), StoreError> {
        Err(refused("release"))
    }
    async fn renew(&self, _: &RecordId, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
        Err(refused("renew"))
    }
}
