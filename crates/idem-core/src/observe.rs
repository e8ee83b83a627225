//! What idem reports about itself, through the `metrics` facade when the
//! `metrics` feature is on (the application installs the recorder:
//! Prometheus, OpenTelemetry, ...), and nothing at all when it is off.
//!
//! | name | kind | attributes | what |
//! | --- | --- | --- | --- |
//! | `idem.decisions` | counter | `idem.operation`, `idem.outcome` | one per call: `executed`, `replayed`, `in_flight`, `mismatch`, `released`, `lease_lost`, `store_error`, `completed_late`, `kept`, `abandoned` ([`Decision`]'s outcomes); logs name them, and the steps on the way, by the same words (field `decision`) |
//! | `idem.store.duration` | histogram, seconds | `idem.store`, `idem.transition` | every store call: `begin`, `complete`, `release`, `renew`, `inspect`, `remove` |
//! | `idem.claims.held` | gauge | | operations running under a claim in this process |

use std::borrow::Cow;
use std::sync::Arc;

use crate::decision::Decision;
use crate::store::Store;

/// Histogram bucket bounds, in seconds, suited to `idem.store.duration`:
/// from 50 µs (the memory store) through the milliseconds of a Redis or
/// PostgreSQL round trip to the seconds of a store that is failing over or
/// timing out. Give them to your exporter so that the store's latency is a
/// histogram that can be aggregated across instances and read with
/// `histogram_quantile`, not a per-instance summary; with
/// `metrics-exporter-prometheus`:
///
/// ```ignore
/// PrometheusBuilder::new().set_buckets_for_metric(
///     Matcher::Full("idem_store_duration".into()),
///     idem_core::STORE_DURATION_BUCKETS,
/// )?
/// ```
pub const STORE_DURATION_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
];

/// Counts one decision about a call of `operation`.
#[inline]
#[allow(clippy::ptr_arg)] // The label clones the `Cow`: no allocation for a static name.
pub(crate) fn decision(operation: &Cow<'static, str>, outcome: Decision) {
    debug_assert!(
        outcome.is_outcome(),
        "{outcome} is a step, not how a call ends"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "idem.decisions",
        "idem.operation" => operation.clone(),
        "idem.outcome" => outcome.as_str()
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (operation, outcome);
}

/// Counts an operation starting (`1.0`) or ending (`-1.0`) under a claim.
#[inline]
pub(crate) fn claims_held(delta: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("idem.claims.held").increment(delta);
    #[cfg(not(feature = "metrics"))]
    let _ = delta;
}

/// The engine's view of a store: the store itself, each call timed when the
/// `metrics` feature is on.
pub(crate) fn timed(store: Arc<dyn Store>) -> Arc<dyn Store> {
    #[cfg(feature = "metrics")]
    return Arc::new(timed::Timed(store));
    #[cfg(not(feature = "metrics"))]
    store
}

#[cfg(feature = "metrics")]
mod timed {
    use std::sync::Arc;
    use std::time::Duration;

    use std::time::Instant;

    use crate::fingerprint::Fingerprint;
    use crate::key::RecordId;
    use crate::store::{Begin, Lease, Outcome, RecordInfo, Removal, Store, StoreError};
    use crate::store_future::StoreFuture;

    /// A store whose calls are timed into `idem.store.duration`.
    pub(super) struct Timed(pub(super) Arc<dyn Store>);

    fn record(store: &'static str, transition: &'static str, start: Instant) {
        metrics::histogram!(
            "idem.store.duration",
            "idem.store" => store,
            "idem.transition" => transition
        )
        .record(start.elapsed().as_secs_f64());
    }

    /// The inner store's answer, timed from `start`: a ready one at once
    /// (no box around it), one on its way when it comes.
    fn timed_answer<T: Send + 'static>(
        store: &'static str,
        transition: &'static str,
        start: Instant,
        answer: StoreFuture<T>,
    ) -> StoreFuture<T> {
        if answer.is_ready() {
            record(store, transition, start);
            return answer;
        }
        StoreFuture::boxed(async move {
            let result = answer.await;
            record(store, transition, start);
            result
        })
    }

    impl Timed {
        async fn time<T>(
            &self,
            transition: &'static str,
            call: impl std::future::Future<Output = T>,
        ) -> T {
            let start = Instant::now();
            let result = call.await;
            record(self.0.name(), transition, start);
            result
        }
    }

    #[async_trait::async_trait]
    impl Store for Timed {
        // The inner store's answers, timed, so that one given at once still
        // is (no box around it).
        fn begin(
            &self,
            id: &RecordId,
            fingerprint: &Fingerprint,
            lease: Duration,
        ) -> StoreFuture<Begin> {
            let start = Instant::now();
            let answer = self.0.begin(id, fingerprint, lease);
            timed_answer(self.0.name(), "begin", start, answer)
        }

        fn complete(
            &self,
            id: &RecordId,
            lease: &Lease,
            outcome: &Outcome,
            ttl: Duration,
        ) -> StoreFuture<()> {
            let start = Instant::now();
            let answer = self.0.complete(id, lease, outcome, ttl);
            timed_answer(self.0.name(), "complete", start, answer)
        }

        async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
            self.time("release", self.0.release(id, lease)).await
        }

        async fn renew(
            &self,
            id: &RecordId,
            lease: &Lease,
            duration: Duration,
        ) -> Result<Lease, StoreError> {
            self.time("renew", self.0.renew(id, lease, duration)).await
        }

        async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
            self.time("inspect", self.0.inspect(id)).await
        }

        async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
            self.time("remove", self.0.remove(id, force)).await
        }

        fn name(&self) -> &'static str {
            self.0.name()
        }

        fn wakes(&self) -> bool {
            self.0.wakes()
        }

        async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
            self.0.changed(id, within).await
        }
    }
}
