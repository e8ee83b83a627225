//! The in-memory store at its byte bound: by default it evicts the completed
//! records closest to expiry and never an in-flight claim; with
//! `WhenFull::Refuse` it refuses new work instead. A service running far past
//! the bound never answers 503.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::memory::{ManualClock, WhenFull};
use idem_core::store::Begin;
use idem_core::{
    Call, Engine, Error, Fingerprint, IdempotencyKey, Lease, MemoryStore, Never, Outcome, Ran,
    Scope, Store,
};

fn call(key: &str) -> Call {
    Call::new(
        Scope::new("bound"),
        IdempotencyKey::parse(key).expect("key"),
        Fingerprint::of("op", &key).expect("fingerprint"),
    )
}

const DAY: Duration = Duration::from_hours(24);

async fn claim(store: &MemoryStore, c: &Call) -> Lease {
    match store.begin(c.record_id(), c.fingerprint(), DAY).await {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!("expected a claim, got {other:?}"),
    }
}

async fn complete(store: &MemoryStore, c: &Call, bytes: usize, ttl: Duration) {
    let lease = claim(store, c).await;
    store
        .complete(c.record_id(), &lease, &Outcome::new(vec![b'r'; bytes]), ttl)
        .await
        .expect("a completion is never refused");
}

#[tokio::test]
async fn at_its_bound_the_store_evicts_the_records_closest_to_expiry_and_never_a_claim() {
    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let store = MemoryStore::builder()
        .max_bytes(40_000)
        .clock(Arc::clone(&clock))
        .build();
    // Three operations in flight from the start, and one record that will
    // expire in a minute, sooner than everything completed after it.
    let held: Vec<Call> = (0..3).map(|i| call(&format!("held-{i}"))).collect();
    let mut leases = Vec::new();
    for c in &held {
        leases.push(claim(&store, c).await);
    }
    let done: Vec<Call> = (0..400).map(|i| call(&format!("done-{i}"))).collect();
    let short = call("short-lived");
    for (i, c) in done.iter().enumerate() {
        complete(&store, c, 200, DAY).await;
        if i == 380 {
            complete(&store, &short, 200, Duration::from_mins(1)).await;
        }
        clock.advance(Duration::from_millis(1));
        assert!(store.bytes() <= 40_000, "over the bound: {}", store.bytes());
    }
    assert!(store.evictions() > 0, "the bound was reached");

    // Never a claim: each holder still completes its record.
    for (c, lease) in held.iter().zip(&leases) {
        store
            .complete(c.record_id(), lease, &Outcome::new(b"late".to_vec()), DAY)
            .await
            .expect("the in-flight claim was not evicted");
    }
    // Closest to expiry first: the one-minute record went although records
    // completed long before it (with a day to live) are still there.
    let oldest_kept = {
        let mut newest_first = done.iter().enumerate().rev();
        let mut first_gone = None;
        for (i, c) in &mut newest_first {
            // Looked at without a claim, which would take room of its own.
            match store.inspect(c.record_id()).await {
                Ok(Some(_)) => {
                    assert!(first_gone.is_none(), "record {i} outlived a newer one");
                }
                Ok(None) => first_gone = first_gone.or(Some(i)),
                other => panic!("unexpected {other:?}"),
            }
        }
        first_gone.map_or(0, |i| i + 1)
    };
    assert!(
        oldest_kept > 0 && oldest_kept < 380,
        "the store kept records {oldest_kept}.. of 400, so some completed before the short-lived one"
    );
    assert!(
        matches!(
            store
                .begin(short.record_id(), short.fingerprint(), DAY)
                .await,
            Ok(Begin::Acquired(_))
        ),
        "the record closest to expiry was evicted first"
    );
}

#[tokio::test]
async fn a_store_that_refuses_at_its_bound_fails_closed_and_evicts_nothing() {
    let store = MemoryStore::builder()
        .max_bytes(4_000)
        .when_full(WhenFull::Refuse)
        .build();
    let engine = Engine::new(store.clone());
    let held = call("held");
    let lease = claim(&store, &held).await;
    let ran = Arc::new(AtomicUsize::new(0));
    let mut stored = Vec::new();
    let refused = loop {
        let c = call(&format!("k-{}", stored.len()));
        let r = Arc::clone(&ran);
        match engine
            .run(&c, |_| async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Never>("x".repeat(100))
            })
            .await
        {
            Ok(Ran::Executed(_)) => stored.push(c),
            Err(Error::Store(e)) => break e,
            other => panic!("unexpected {other:?}"),
        }
        assert!(stored.len() < 100, "the bound must be reached");
    };
    assert!(refused.is_transient());
    assert!(refused.to_string().contains("4000 bytes"), "{refused}");
    assert_eq!(
        ran.load(Ordering::SeqCst),
        stored.len(),
        "the refused operation did not run"
    );
    assert_eq!(store.evictions(), 0);
    for c in &stored {
        let again = engine
            .run(c, |_| async { Ok::<_, Never>(String::new()) })
            .await;
        assert!(
            matches!(again, Ok(Ran::Replayed(_))),
            "every record is kept"
        );
    }
    store
        .complete(held.record_id(), &lease, &Outcome::new(b"x".to_vec()), DAY)
        .await
        .expect("the in-flight record was not evicted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_running_far_past_the_bound_never_answers_503() {
    use idem_examples::payments::{router, App, MemoryLedger};
    let store = MemoryStore::builder().max_bytes(256 << 10).build();
    let url = idem_tests::serve(router(App {
        engine: Engine::new(store.clone()),
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await;
    let c = reqwest::Client::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = Vec::new();
    for i in 0..4000 {
        let (c, url, gate) = (c.clone(), url.clone(), Arc::clone(&gate));
        tasks.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.expect("semaphore");
            c.post(format!("{url}/accounts/a{}/debits", i % 50))
                .header("idempotency-key", format!("bound-{i}"))
                .header("content-type", "application/json")
                .body(r#"{"amount":1}"#)
                .send()
                .await
                .expect("request")
                .status()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task"), reqwest::StatusCode::CREATED);
    }
    assert!(
        store.evictions() > 1000,
        "ran past the bound: {} evictions",
        store.evictions()
    );
    assert!(store.bytes() <= 256 << 10);
}

/// A writer the test reads back: what the store logged.
#[derive(Clone, Default)]
struct Logged(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn every_record_evicted_before_its_lifetime_ends_is_counted_and_warned_of() {
    let logged = Logged::default();
    let writer = logged.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let store = MemoryStore::builder()
        .max_bytes(20_000)
        .clock(Arc::clone(&clock))
        .build();
    // Records whose lifetime is over (kept as traces of themselves) go
    // first, and are no broken promise: neither counted nor warned of.
    let expired: Vec<Call> = (0..20).map(|i| call(&format!("expired-{i}"))).collect();
    for c in &expired {
        complete(&store, c, 200, Duration::from_mins(1)).await;
    }
    clock.advance(Duration::from_mins(2));
    let live: Vec<Call> = (0..200).map(|i| call(&format!("live-{i}"))).collect();
    for c in &live {
        complete(&store, c, 200, DAY).await;
        clock.advance(Duration::from_millis(1));
    }
    let mut kept = 0;
    for c in &live {
        if store
            .inspect(c.record_id())
            .await
            .expect("inspect")
            .is_some()
        {
            kept += 1;
        }
    }
    let lost = 200 - kept;
    assert!(lost > 0, "the bound was reached");
    assert_eq!(
        store.evictions(),
        lost,
        "every live record evicted is counted, and nothing else"
    );
    let text = String::from_utf8_lossy(
        &logged
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned();
    let warned: u64 = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("decision=\"evicted\""))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("evicted="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum();
    assert_eq!(warned, lost, "each eviction warned of: {text}");
    assert!(
        text.contains("before their lifetime ended") && text.contains("max_bytes"),
        "the warning says what happened and what to do: {text}"
    );
    // The expired records' traces went first: their late retries now run.
    for c in &expired {
        assert!(matches!(
            store.begin(c.record_id(), c.fingerprint(), DAY).await,
            Ok(Begin::Acquired(_))
        ));
    }
}
