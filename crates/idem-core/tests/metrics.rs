//! What idem reports through the `metrics` facade (feature `metrics`),
//! counted with the facade's debugging recorder: a dashboard sees every
//! decision once, every store call's duration, and the claims held.

use idem_core::{Call, Engine, Error, Fingerprint, IdempotencyKey, MemoryStore, Never};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

fn call(key: &str, input: u32) -> Call {
    Call::new(
        "shop",
        IdempotencyKey::parse(key).expect("key"),
        Fingerprint::of("ship", &input).expect("fingerprint"),
    )
    .with_operation("ship-order")
}

type Entry = (
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
);

fn labels(key: &CompositeKey) -> Vec<(String, String)> {
    key.key()
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect()
}

fn decisions(entries: &[Entry], outcome: &str) -> u64 {
    entries
        .iter()
        .filter(|(k, ..)| k.kind() == MetricKind::Counter && k.key().name() == "idem.decisions")
        .filter(|(k, ..)| {
            labels(k).contains(&("idem.outcome".into(), outcome.into()))
                && labels(k).contains(&("idem.operation".into(), "ship-order".into()))
        })
        .map(|(.., v)| match v {
            DebugValue::Counter(n) => *n,
            _ => 0,
        })
        .sum()
}

fn store_calls(entries: &[Entry], transition: &str) -> usize {
    entries
        .iter()
        .filter(|(k, ..)| {
            k.kind() == MetricKind::Histogram && k.key().name() == "idem.store.duration"
        })
        .filter(|(k, ..)| {
            labels(k).contains(&("idem.transition".into(), transition.into()))
                && labels(k).contains(&("idem.store".into(), "memory".into()))
        })
        .map(|(.., v)| match v {
            DebugValue::Histogram(samples) => samples.len(),
            _ => 0,
        })
        .sum()
}

fn claims_held(entries: &[Entry]) -> Option<f64> {
    entries
        .iter()
        .find(|(k, ..)| k.kind() == MetricKind::Gauge && k.key().name() == "idem.claims.held")
        .and_then(|(.., v)| match v {
            DebugValue::Gauge(g) => Some(g.into_inner()),
            _ => None,
        })
}

#[tokio::test]
async fn a_dashboard_sees_each_decision_once_and_every_store_call() {
    let recorder = DebuggingRecorder::new();
    let snapshotter: Snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let engine = Engine::new(MemoryStore::new());

    // Executed, then replayed twice, then the key reused with other input.
    let ran = engine
        .run(&call("order-1", 1), |_| async { Ok::<_, Never>(7) })
        .await;
    assert!(ran.is_ok());
    for _ in 0..2 {
        let again = engine
            .run(&call("order-1", 1), |_| async { Ok::<_, Never>(8) })
            .await;
        assert!(matches!(again, Ok(r) if r.is_replayed()));
    }
    let other = engine
        .run(&call("order-1", 2), |_| async { Ok::<_, Never>(9) })
        .await;
    assert!(matches!(other, Err(Error::Mismatch)));
    // A duplicate while the first runs.
    let slow = engine.clone();
    let (started, running_now) = tokio::sync::oneshot::channel();
    let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        slow.run(&call("order-2", 1), |_| async move {
            let _ = started.send(());
            let _ = finished.await;
            Ok::<_, Never>(1)
        })
        .await
    });
    running_now.await.expect("the first call runs");
    let during = engine
        .run(&call("order-2", 1), |_| async { Ok::<_, Never>(2) })
        .await;
    assert!(matches!(during, Err(Error::InFlight { .. })));
    let _ = finish.send(());
    assert!(running.await.expect("task").is_ok());

    let entries = snapshotter.snapshot().into_vec();
    assert_eq!(
        decisions(&entries, "executed"),
        2,
        "order-1 and order-2 ran"
    );
    assert_eq!(decisions(&entries, "replayed"), 2);
    assert_eq!(decisions(&entries, "mismatch"), 1);
    assert_eq!(decisions(&entries, "in_flight"), 1);
    assert_eq!(decisions(&entries, "released"), 0);
    assert_eq!(store_calls(&entries, "begin"), 6, "one begin per call");
    assert_eq!(
        store_calls(&entries, "complete"),
        2,
        "one complete per execution"
    );
    assert_eq!(
        claims_held(&entries),
        Some(0.0),
        "no claim held once all finished"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_operation_with_nothing_to_record_is_counted_as_kept() {
    let recorder = DebuggingRecorder::new();
    let snapshotter: Snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let engine = Engine::new(MemoryStore::new());
    let ran = engine
        .execute(&call("order-3", 1), |_| async {
            idem_core::adapter::Completion::Keep(5)
        })
        .await;
    assert!(ran.is_ok());
    let entries = snapshotter.snapshot().into_vec();
    assert_eq!(decisions(&entries, "kept"), 1);
    assert_eq!(decisions(&entries, "executed"), 0);
}
