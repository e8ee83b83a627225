//! `shutdown_on_signals`: a shutdown token cancelled when the process is
//! asked to stop, as orchestrators ask (SIGTERM) and as a terminal does
//! (Ctrl-C, SIGINT).

use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGTERM or SIGINT: for your HTTP
/// server's graceful shutdown (then [`Engine::drained`](crate::Engine::drained)),
/// and for a queue consumer's `Running::until` (`idem-queue`). A second signal ends the process at once (exit
/// status 130), for an operator who will not wait for the drain. Must be
/// called inside a Tokio runtime.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let first = asked_to_stop().await;
        tracing::info!(target: "idem", signal = first, "shutting down: no new work; running work finishes");
        cancel.cancel();
        let second = asked_to_stop().await;
        tracing::warn!(target: "idem", signal = second, "asked again: exiting now");
        std::process::exit(130);
    });
    token
}

/// Waits for SIGTERM or SIGINT; which came.
async fn asked_to_stop() -> &'static str {
    #[cfg(unix)]
    {
        use std::task::Poll;
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                std::future::poll_fn(|cx| {
                    if term.poll_recv(cx).is_ready() {
                        Poll::Ready("SIGTERM")
                    } else if int.poll_recv(cx).is_ready() {
                        Poll::Ready("SIGINT")
                    } else {
                        Poll::Pending
                    }
                })
                .await
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(target: "idem", error = %e, "cannot listen for SIGTERM and SIGINT; no graceful shutdown");
                std::future::pending().await
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
