//! Switching a fleet to compact Redis keys, instance by instance: while
//! some instances write records under hex keys and others under compact
//! ones, every retry still finds its record, whichever instance recorded
//! it; duplicates racing across the two run once; a late retry is refused
//! from either layout's trace; an operator's removal reaches both. On one
//! Redis and on a Redis Cluster (where a record's two keys share a slot).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Engine, Error, Never, OnInFlight, Policy, Ran, Removal, Store};
use idem_redis::{KeyLayout, RedisStore};
use idem_tests::{call, redis_cluster_nodes, redis_connection, redis_url, unique_prefix};

/// Two stores on one Redis under one prefix: an instance still writing hex
/// keys and one switched to compact keys.
async fn fleet(cluster: bool, label: &str) -> (RedisStore, RedisStore) {
    let store = if cluster {
        RedisStore::connect_cluster(redis_cluster_nodes())
            .await
            .expect("Redis Cluster (scripts/services.sh)")
    } else {
        RedisStore::connect(&redis_url()).await.expect("Redis")
    };
    let store = store.with_prefix(&unique_prefix(label));
    (
        store.clone().with_key_layout(KeyLayout::Hex),
        store.with_key_layout(KeyLayout::Compact),
    )
}

async fn a_retry_finds_its_record_whichever_instance_wrote_it(cluster: bool) {
    let (hex, compact) = fleet(cluster, "layouts-replay").await;
    for (writer, reader, key) in [(&hex, &compact, "by-hex"), (&compact, &hex, "by-compact")] {
        let c = call("accounts", key);
        let Ok(Begin::Acquired(lease)) = writer
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
            .await
        else {
            panic!("{key}: a first claim")
        };
        // In flight under one layout: the other instance waits for it.
        let busy = reader
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
            .await;
        assert!(
            matches!(busy, Ok(Begin::InFlight { .. })),
            "{key}: {busy:?}"
        );
        let receipt = idem_http::encode(201, &[("content-type", b"application/json")], b"{}");
        writer
            .complete(c.record_id(), &lease, &receipt, Duration::from_mins(5))
            .await
            .expect("complete");
        match reader
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
            .await
        {
            Ok(Begin::Replay(o)) => assert_eq!(o.as_bytes(), receipt.as_bytes(), "{key}"),
            other => panic!("{key}: the other layout's record: {other:?}"),
        }
        let info = reader.inspect(c.record_id()).await.expect("inspect");
        assert!(info.is_some(), "{key}: inspected through the other layout");
        // Where it was written, and only there.
        let here = exists(cluster, &writer.key(c.record_id())).await;
        let there = exists(cluster, &reader.key(c.record_id())).await;
        assert!(here && !there, "{key}: written under its writer's key only");
    }
}

/// Whether `key` exists, asked of the server or, on a cluster, through
/// a cluster connection (which routes by the key's slot).
async fn exists(cluster: bool, key: &str) -> bool {
    let mut exists = redis::cmd("EXISTS");
    exists.arg(key);
    if cluster {
        let client = redis::cluster::ClusterClient::new(redis_cluster_nodes()).expect("nodes");
        let mut con = client.get_async_connection().await.expect("cluster");
        exists.query_async(&mut con).await.expect("EXISTS")
    } else {
        let mut con = redis_connection(&redis_url()).await;
        exists.query_async(&mut con).await.expect("EXISTS")
    }
}

async fn duplicates_racing_across_layouts_run_once(cluster: bool) {
    let (hex, compact) = fleet(cluster, "layouts-race").await;
    // Duplicates wait for the first: woken by its completion, whichever
    // layout wrote it (wake-ups name the hex key).
    let policy = Policy::default().on_in_flight(OnInFlight::Wait {
        max: Duration::from_secs(10),
    });
    let engines = [
        Engine::new(hex).with_policy(policy),
        Engine::new(compact).with_policy(policy),
    ];
    let runs = Arc::new(AtomicUsize::new(0));
    let c = call("accounts", "raced");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64 {
        let engine = engines[i % 2].clone();
        let (runs, c) = (Arc::clone(&runs), c.clone());
        tasks.spawn(async move {
            engine
                .run(&c, |_| async move {
                    let n = runs.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    Ok::<_, Never>(format!("debit {n}"))
                })
                .await
        });
    }
    let mut answers = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done.expect("task") {
            Ok(Ran::Executed(v) | Ran::Replayed(v)) => answers.push(v),
            other => panic!("a duplicate: {other:?}"),
        }
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "run once across both layouts"
    );
    assert!(answers.iter().all(|a| a == "debit 0"), "{answers:?}");
}

async fn a_late_retry_is_refused_and_a_removal_reaches_either_layout(cluster: bool) {
    let (hex, compact) = fleet(cluster, "layouts-late").await;
    let ttl = Duration::from_millis(200);
    let policy = Policy::default().ttl(ttl);
    for (writer, reader, key) in [
        (&hex, &compact, "late-hex"),
        (&compact, &hex, "late-compact"),
    ] {
        let c = call("accounts", key);
        let runs = Arc::new(AtomicUsize::new(0));
        let run = |store: &RedisStore| {
            let engine = Engine::new(store.clone()).with_policy(policy);
            let (runs, c) = (Arc::clone(&runs), c.clone());
            async move {
                engine
                    .run(&c, |_| async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, Never>(1)
                    })
                    .await
            }
        };
        assert!(matches!(run(writer).await, Ok(Ran::Executed(1))), "{key}");
        // Until the record expires, replayed; then refused from the trace.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut answer = run(reader).await;
        while matches!(answer, Ok(Ran::Replayed(_))) {
            assert!(std::time::Instant::now() < deadline, "{key}: never expired");
            tokio::time::sleep(Duration::from_millis(10)).await;
            answer = run(reader).await;
        }
        assert!(matches!(answer, Err(Error::Expired)), "{key}: {answer:?}");
        // The operator removes it through the other instance: the trace
        // goes, and the key runs as new.
        assert_eq!(
            reader.remove(c.record_id(), false).await.expect("remove"),
            Removal::Removed,
            "{key}"
        );
        assert!(matches!(run(writer).await, Ok(Ran::Executed(1))), "{key}");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{key}");
    }
}

#[tokio::test]
async fn a_retry_finds_its_record_whichever_instance_wrote_it_on_redis() {
    a_retry_finds_its_record_whichever_instance_wrote_it(false).await;
}

#[tokio::test]
async fn a_retry_finds_its_record_whichever_instance_wrote_it_on_a_cluster() {
    a_retry_finds_its_record_whichever_instance_wrote_it(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_racing_across_layouts_run_once_on_redis() {
    duplicates_racing_across_layouts_run_once(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_racing_across_layouts_run_once_on_a_cluster() {
    duplicates_racing_across_layouts_run_once(true).await;
}

#[tokio::test]
async fn a_late_retry_is_refused_and_a_removal_reaches_either_layout_on_redis() {
    a_late_retry_is_refused_and_a_removal_reaches_either_layout(false).await;
}

#[tokio::test]
async fn a_late_retry_is_refused_and_a_removal_reaches_either_layout_on_a_cluster() {
    a_late_retry_is_refused_and_a_removal_reaches_either_layout(true).await;
}
