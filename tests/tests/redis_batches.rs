//! Claims and completions asked for at once in a batch (`idem_core::adapter::in_batch`,
//! as a queue consumer's `handle_batch` runs its deliveries) go to Redis
//! together, one script call for many (`RedisStore::with_batching`, on by
//! default), and each is answered as if it had been sent alone: a payment asked twice in
//! one batch is claimed once, a corrupt record fails alone and claims
//! nothing, a full server refuses a whole batch and leaves nothing in
//! flight.
//!
//! A test's begins land in one batch because it asks for them in one poll
//! (`join_all`) on the test's single-threaded runtime: the task that sends
//! them runs only once the test's task waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::FutureExt as _;
use idem_core::adapter::in_batch;
use idem_core::store::Begin;
use idem_core::{Call, Engine, Never, Outcome, Ran, Store, StoreErrorKind};
use idem_redis::RedisStore;
use idem_tests::{redis_command_calls, redis_connection, unique_prefix, PrivateRedis};

const LEASE: Duration = Duration::from_secs(30);

/// A store on `server` that has made its first calls (its scripts loaded,
/// alone and batched; the server's eviction policy read), so that what a
/// test asks next is only its own calls.
async fn warm_store(server: &PrivateRedis) -> RedisStore {
    let store = RedisStore::connect(&server.url()).await.expect("redis");
    idem_tests::claim(&store, &call("warm-up"), LEASE).await;
    // The batch's script loaded too.
    let warm = [call("warm-up-1"), call("warm-up-2")];
    for answer in begin_all(&store, &warm).await {
        assert!(matches!(answer, Ok(Begin::Acquired(_))), "{answer:?}");
    }
    store
}

/// Script calls the server has run.
async fn evalsha(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    redis_command_calls(con)
        .await
        .get("evalsha")
        .copied()
        .unwrap_or_default()
}

fn call(key: &str) -> Call {
    idem_tests::call("batches", key)
}

async fn begin_all(
    store: &RedisStore,
    calls: &[Call],
) -> Vec<Result<Begin, idem_core::StoreError>> {
    in_batch(join_all(
        calls
            .iter()
            .map(|c| store.begin(c.record_id(), c.fingerprint(), LEASE)),
    ))
    .await
}

#[tokio::test]
async fn sixty_four_payments_asked_at_once_each_run_once_in_a_few_script_calls() {
    let server = PrivateRedis::start(false);
    let store = warm_store(&server).await;
    let engine = Engine::new(store.clone());
    let mut con = redis_connection(&server.url()).await;
    let before = evalsha(&mut con).await;
    let ran = AtomicUsize::new(0);
    let calls: Vec<Call> = (0..64).map(|i| call(&format!("pay-{i}"))).collect();
    let answers = in_batch(join_all(calls.iter().map(|c| {
        engine.run(c, |_claim| async {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Never>(format!("receipt for {}", c.key()))
        })
    })))
    .await;
    for (c, answer) in calls.iter().zip(&answers) {
        assert_eq!(
            answer.as_ref().ok(),
            Some(&Ran::Executed(format!("receipt for {}", c.key()))),
            "{answer:?}"
        );
    }
    assert_eq!(ran.load(Ordering::SeqCst), 64);
    // 64 claims and 64 completions: 128 script calls one by one.
    let calls_made = evalsha(&mut con).await - before;
    assert!(
        calls_made <= 8,
        "64 payments asked at once took {calls_made} script calls"
    );
    // Each retry replays its own receipt, byte for byte.
    let again = join_all(
        calls
            .iter()
            .map(|c| engine.run(c, |_claim| async { Ok::<_, Never>("ran twice".to_owned()) })),
    )
    .await;
    for (c, answer) in calls.iter().zip(&again) {
        assert_eq!(
            answer.as_ref().ok(),
            Some(&Ran::Replayed(format!("receipt for {}", c.key())))
        );
    }
    assert_eq!(ran.load(Ordering::SeqCst), 64);
}

#[tokio::test]
async fn a_payment_asked_twice_in_one_batch_is_claimed_once() {
    let server = PrivateRedis::start(false);
    let store = warm_store(&server).await;
    let mut con = redis_connection(&server.url()).await;
    let before = evalsha(&mut con).await;
    let twice = call("pay-twice");
    let answers = begin_all(&store, &[twice.clone(), call("pay-other"), twice.clone()]).await;
    assert_eq!(
        evalsha(&mut con).await - before,
        1,
        "the three claims went in one call"
    );
    let lease = match &answers[0] {
        Ok(Begin::Acquired(lease)) => *lease,
        other => panic!("the first asking claims: {other:?}"),
    };
    assert!(
        matches!(answers[1], Ok(Begin::Acquired(_))),
        "{:?}",
        answers[1]
    );
    match &answers[2] {
        Ok(Begin::InFlight { retry_after }) => assert!(*retry_after <= LEASE),
        other => panic!("the second asking finds the first in flight: {other:?}"),
    }
    // Completed twice in one batch, the first outcome is kept.
    let first = Outcome::new(b"receipt 1".to_vec());
    let second = Outcome::new(b"receipt 2".to_vec());
    let completed = in_batch(join_all([
        store.complete(twice.record_id(), &lease, &first, Duration::from_mins(1)),
        store.complete(twice.record_id(), &lease, &second, Duration::from_mins(1)),
    ]))
    .await;
    assert!(completed.iter().all(Result::is_ok), "{completed:?}");
    match store
        .begin(twice.record_id(), twice.fingerprint(), LEASE)
        .await
    {
        Ok(Begin::Replay(outcome)) => assert_eq!(outcome.as_bytes(), first.as_bytes()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_corrupt_record_in_a_batch_fails_alone_and_the_others_are_claimed() {
    let server = PrivateRedis::start(false);
    let store = warm_store(&server)
        .await
        .with_prefix(&unique_prefix("batch-corrupt"));
    let mut con = redis_connection(&server.url()).await;
    let (corrupt, newer) = (call("pay-corrupt"), call("pay-newer"));
    let planted = [
        (store.key(corrupt.record_id()), "F-too-short".to_owned()),
        (store.key(newer.record_id()), format!("9{}", "x".repeat(80))),
    ];
    for (key, value) in &planted {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async(&mut con)
            .await
            .expect("SET");
    }
    let calls = [
        call("pay-a"),
        corrupt.clone(),
        call("pay-b"),
        newer,
        call("pay-c"),
    ];
    let before = evalsha(&mut con).await;
    let answers = begin_all(&store, &calls).await;
    assert_eq!(evalsha(&mut con).await - before, 1);
    for i in [0, 2, 4] {
        assert!(
            matches!(answers[i], Ok(Begin::Acquired(_))),
            "{:?}",
            answers[i]
        );
    }
    match &answers[1] {
        Err(e) => assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}"),
        other => panic!("a corrupt record: {other:?}"),
    }
    match &answers[3] {
        Err(e) => assert_eq!(e.kind(), StoreErrorKind::NewerFormat, "{e}"),
        other => panic!("a record of a newer format: {other:?}"),
    }
    // Neither was claimed or changed.
    for (key, value) in &planted {
        let now: String = redis::cmd("GET")
            .arg(key)
            .query_async(&mut con)
            .await
            .expect("GET");
        assert_eq!(&now, value);
    }
}

#[tokio::test]
async fn a_full_server_refuses_a_whole_batch_and_leaves_nothing_in_flight() {
    let server = PrivateRedis::start(false);
    let store = RedisStore::connect(&server.url()).await.expect("redis");
    let mut con = redis_connection(&server.url()).await;
    let recorded = call("pay-recorded");
    let lease = idem_tests::claim(&store, &recorded, LEASE).await;
    let receipt = Outcome::new(b"receipt for recorded".to_vec());
    store
        .complete(
            recorded.record_id(),
            &lease,
            &receipt,
            Duration::from_mins(1),
        )
        .await
        .expect("complete");
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query_async(&mut con)
        .await
        .expect("CONFIG SET");
    let fresh: Vec<Call> = (0..8).map(|i| call(&format!("pay-new-{i}"))).collect();
    let mut calls = fresh.clone();
    calls.insert(4, recorded.clone());
    let answers = begin_all(&store, &calls).await;
    for (c, answer) in calls.iter().zip(&answers) {
        if c.key() == recorded.key() {
            match answer {
                Ok(Begin::Replay(outcome)) => assert_eq!(outcome.as_bytes(), receipt.as_bytes()),
                other => panic!("recorded work on a full server: {other:?}"),
            }
        } else {
            match answer {
                Err(e) => assert_eq!(e.kind(), StoreErrorKind::Full, "{e}"),
                other => panic!("new work on a full server: {other:?}"),
            }
        }
    }
    for c in &fresh {
        let exists: u64 = redis::cmd("EXISTS")
            .arg(store.key(c.record_id()))
            .query_async(&mut con)
            .await
            .expect("EXISTS");
        assert_eq!(exists, 0, "{} was left in flight", c.key());
    }
}

#[tokio::test]
async fn payments_asked_at_once_outside_a_batch_each_go_alone() {
    let server = PrivateRedis::start(false);
    let store = warm_store(&server).await;
    let mut con = redis_connection(&server.url()).await;
    let before = evalsha(&mut con).await;
    let calls: Vec<Call> = (0..8).map(|i| call(&format!("alone-{i}"))).collect();
    let answers = join_all(
        calls
            .iter()
            .map(|c| store.begin(c.record_id(), c.fingerprint(), LEASE)),
    )
    .await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Begin::Acquired(_)))));
    // An HTTP service's requests never wait on another's call.
    assert_eq!(evalsha(&mut con).await - before, 8);
}

#[tokio::test]
async fn a_batch_of_payments_on_a_cluster_goes_to_each_records_slot_and_each_runs_once() {
    let store = RedisStore::connect_cluster(idem_tests::redis_cluster_nodes())
        .await
        .expect("cluster")
        .with_prefix(&unique_prefix("batch-cluster"));
    let engine = Engine::new(store);
    let ran = AtomicUsize::new(0);
    // Records spread over the cluster's slots: each group goes to its node.
    let calls: Vec<Call> = (0..32).map(|i| call(&format!("spread-{i}"))).collect();
    let run = || {
        in_batch(join_all(calls.iter().map(|c| {
            engine.run(c, |_claim| async {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Never>(format!("receipt for {}", c.key()))
            })
        })))
    };
    for (c, answer) in calls.iter().zip(run().await) {
        assert_eq!(
            answer.ok(),
            Some(Ran::Executed(format!("receipt for {}", c.key())))
        );
    }
    for (c, answer) in calls.iter().zip(run().await) {
        assert_eq!(
            answer.ok(),
            Some(Ran::Replayed(format!("receipt for {}", c.key())))
        );
    }
    assert_eq!(ran.load(Ordering::SeqCst), 32);
}

#[tokio::test]
async fn payments_whose_callers_go_away_while_their_batch_is_queued_are_released_not_left_in_flight(
) {
    let server = PrivateRedis::start(false);
    let store = warm_store(&server).await;
    let engine = Engine::new(store.clone());
    let calls: Vec<Call> = (0..8).map(|i| call(&format!("gone-{i}"))).collect();
    // The callers go away after their claims are queued and before any is
    // answered: nothing ran under them, so each claim that lands is released.
    // Polled once (each claim queued), then dropped.
    let gone = in_batch(join_all(calls.iter().map(|c| engine.begin(c)))).now_or_never();
    assert!(
        gone.is_none(),
        "the batch was answered before its callers left"
    );
    for c in &calls {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while store
            .inspect(c.record_id())
            .await
            .expect("inspect")
            .is_some()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} still in flight",
                c.key()
            );
            tokio::task::yield_now().await;
        }
    }
    // A retry runs each at once.
    let ran = AtomicUsize::new(0);
    let retried = in_batch(join_all(calls.iter().map(|c| {
        engine.run(c, |_claim| async {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Never>("ran".to_owned())
        })
    })))
    .await;
    assert!(
        retried.iter().all(|r| matches!(r, Ok(Ran::Executed(_)))),
        "{retried:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn a_holder_that_lost_its_claim_records_nothing_in_a_batch_beside_one_that_holds() {
    let server = PrivateRedis::start(false);
    let store = warm_store(&server).await;
    let (lost, held) = (call("pay-lost"), call("pay-held"));
    let stale = idem_tests::claim(&store, &lost, Duration::from_millis(50)).await;
    let holding = idem_tests::claim(&store, &held, LEASE).await;
    // The first holder froze past its lease; another attempt took over.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let taker = loop {
        match store
            .begin(lost.record_id(), lost.fingerprint(), LEASE)
            .await
        {
            Ok(Begin::Acquired(lease)) => break lease,
            Ok(Begin::InFlight { .. }) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the lease never ended"
                );
                tokio::task::yield_now().await;
            }
            other => panic!("{other:?}"),
        }
    };
    let (late, fresh) = (
        Outcome::new(b"late".to_vec()),
        Outcome::new(b"held".to_vec()),
    );
    let completed = in_batch(join_all([
        store.complete(lost.record_id(), &stale, &late, Duration::from_mins(1)),
        store.complete(held.record_id(), &holding, &fresh, Duration::from_mins(1)),
    ]))
    .await;
    match &completed[0] {
        Err(e) => assert!(e.is_lease_lost(), "{e}"),
        other => panic!("a completion by a lost claim: {other:?}"),
    }
    assert!(completed[1].is_ok(), "{:?}", completed[1]);
    // The taker's claim is untouched, and records its own outcome.
    let own = Outcome::new(b"taker".to_vec());
    store
        .complete(lost.record_id(), &taker, &own, Duration::from_mins(1))
        .await
        .expect("the taker completes");
    match store
        .begin(lost.record_id(), lost.fingerprint(), LEASE)
        .await
    {
        Ok(Begin::Replay(outcome)) => assert_eq!(outcome.as_bytes(), own.as_bytes()),
        other => panic!("{other:?}"),
    }
}
