//! `Running`: how a broker's consumer runs, the same on every broker. It
//! keeps consuming across broker restarts and lost connections, connecting
//! again with a backoff and logging each; on shutdown it stops taking new
//! deliveries, lets the running handlers finish and record within a bound,
//! then returns. What did not finish is left unacknowledged, to be
//! delivered again (or to its claim's lease), never lost.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::delivery::BrokerError;

/// How long running handlers get to finish once shutdown is asked for, by
/// default: 30 seconds, as Kubernetes' default grace period before it kills
/// a pod.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(30);

/// A session that ran this long before it was lost starts the reconnect
/// backoff over.
const HEALTHY: Duration = Duration::from_secs(30);

/// How a consumer runs: until [`shutdown`](Self::until) is cancelled,
/// reconnecting with [`reconnect`](Self::reconnect)'s backoff, and letting
/// running handlers finish for up to [`drain`](Self::drain) on shutdown.
#[derive(Clone, Debug)]
pub struct Running {
    pub(crate) shutdown: CancellationToken,
    pub(crate) drain: Duration,
    pub(crate) reconnect: Backoff,
}

impl Default for Running {
    /// Until the process ends (no shutdown signal), draining for 30 s,
    /// reconnecting after 1 s doubling to 30 s.
    fn default() -> Self {
        Self {
            shutdown: CancellationToken::new(),
            drain: DEFAULT_DRAIN,
            reconnect: Backoff {
                first: Duration::from_secs(1),
                max: Duration::from_secs(30),
            },
        }
    }
}

impl Running {
    /// Stops when `shutdown` is cancelled (for SIGTERM and Ctrl-C:
    /// [`shutdown_on_signals`](idem_core::shutdown_on_signals)).
    #[must_use]
    pub fn until(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// How long running handlers get to finish and record once shutdown is
    /// asked for (default [`DEFAULT_DRAIN`]); what is still running then
    /// is left to be delivered again.
    #[must_use]
    pub fn drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// The pauses before connecting again after a lost connection (default
    /// 1 s doubling to 30 s; back to 1 s after a session that lasted 30 s).
    #[must_use]
    pub fn reconnect(mut self, backoff: Backoff) -> Self {
        self.reconnect = backoff;
        self
    }

    /// Runs `batch` to its end, unless shutdown is asked for and the drain
    /// runs out first: `None` then, and what the batch did not finish is
    /// left unacknowledged, to come back.
    #[cfg_attr(not(any(feature = "redis-streams", feature = "sqs")), allow(dead_code))]
    pub(crate) async fn within_drain<T>(&self, batch: impl Future<Output = T>) -> Option<T> {
        let drained = async {
            self.shutdown.cancelled().await;
            tokio::time::sleep(self.drain).await;
        };
        tokio::select! {
            done = batch => Some(done),
            () = drained => None,
        }
    }

    /// Waits for the running handlers to finish, at most the drain; those
    /// still running then are detached (their deliveries stay
    /// unacknowledged, to come back).
    #[cfg_attr(not(any(feature = "rabbitmq", feature = "nats")), allow(dead_code))]
    pub(crate) async fn drain_out(&self, running: &mut JoinSet<()>, broker: &str) {
        let drained = tokio::time::timeout(self.drain, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(target: "idem", broker, still_running = running.len(), drain = ?self.drain, "shutdown: handlers still running past the drain are left; their messages will be delivered again");
        }
        running.detach_all();
    }
}

/// How one session with the broker ended.
pub(crate) enum Ended {
    /// Shutdown was asked for, and the running handlers drained.
    Shutdown,
    /// The connection (or the subscription) was lost: connect again.
    Lost(BrokerError),
    /// The broker refused what it was asked (credentials, a missing queue
    /// or stream): connecting again cannot fix it.
    Refused(BrokerError),
}

/// Runs `session` again and again, with the reconnect backoff between
/// them, until shutdown or a refusal.
pub(crate) async fn supervise<F, Fut>(
    broker: &'static str,
    running: &Running,
    mut session: F,
) -> Result<(), BrokerError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Ended>,
{
    let mut lost = 0;
    loop {
        if running.shutdown.is_cancelled() {
            return Ok(());
        }
        let started = tokio::time::Instant::now();
        // Boxed: a session's future (its stream, its running batches) is
        // large, and the caller awaits this one.
        match Box::pin(session()).await {
            Ended::Shutdown => {
                tracing::info!(target: "idem", broker, "shutdown: stopped consuming");
                return Ok(());
            }
            Ended::Refused(e) => {
                tracing::error!(target: "idem", broker, error = %e, "the broker refused the consumer; not connecting again");
                return Err(e);
            }
            Ended::Lost(e) => {
                if started.elapsed() >= HEALTHY {
                    lost = 0;
                }
                lost += 1;
                let pause = running.reconnect.after(lost);
                tracing::warn!(target: "idem", broker, error = %e, again_in = ?pause, "the connection to the broker was lost; connecting again");
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = running.shutdown.cancelled() => return Ok(()),
                }
            }
        }
    }
}
