//! Serving the payments router over HTTP/1.1, with a deadline on request
//! headers so that clients that stop mid-headers do not hold connections
//! forever (`axum::serve` sets none).

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How long a client has to send a request's headers (default of `serve`'s
/// callers): past it, the connection is closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until the process ends. A connection whose
/// request headers have not all arrived `header_timeout` after the request
/// began is closed.
pub async fn serve(listener: TcpListener, router: Router, header_timeout: Duration) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}
