//! `RedisStore` beyond the conformance kit: memory per record, commands per
//! request, and a server killed and restarted under a run of requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Call, Engine, Error, Never, Outcome, Policy, Ran, Store};
use idem_redis::RedisStore;
use idem_tests::{redis_command_calls, redis_connection, redis_url, unique_prefix, PrivateRedis};

fn call(key: &str) -> Call {
    idem_tests::call("redis-tests", key)
}

#[tokio::test]
async fn memory_per_record_with_a_200_byte_response() {
    // The default prefix and key layout, as a deployment has them; the key
    // is unique to this run.
    let store = RedisStore::connect(&redis_url()).await.expect("redis");
    let c = call(&unique_prefix("memory").replace(':', "-"));
    let lease = idem_tests::claim(&store, &c, Duration::from_mins(1)).await;
    let outcome = Outcome::new(vec![b'r'; 200]);
    store
        .complete(c.record_id(), &lease, &outcome, Duration::from_hours(1))
        .await
        .expect("complete");
    let mut con = redis_connection(&redis_url()).await;
    let key = store.key(c.record_id());
    // The record carries its late-retry trace: no key beside it.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{key}*"))
        .query_async(&mut con)
        .await
        .expect("KEYS");
    assert_eq!(
        keys,
        std::slice::from_ref(&key),
        "one key a record, trace included"
    );
    let usage: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(&mut con)
        .await
        .expect("MEMORY USAGE");
    let _: i64 = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut con)
        .await
        .expect("DEL");
    let overhead = usage - 200;
    println!("redis record with a 200-byte outcome, its trace in it: MEMORY USAGE {usage} bytes, {overhead} above the outcome");
    // The compact key (48 bytes allocated), the dict entry (24), the value's
    // object (16) and string header (6), state, fingerprint, token and
    // replay deadline (62): 156, and the allocator's rounding of the value
    // (at most 64 at this size).
    assert!(
        overhead <= 220,
        "{usage} bytes for a 200-byte outcome: {overhead} bytes of overhead"
    );
}

/// The commands the scripts run on the server; `INFO commandstats` counts
/// them beside the client's own `EVALSHA`s.
const SCRIPT_COMMANDS: [&str; 7] = ["time", "get", "mget", "set", "pttl", "pexpire", "publish"];

/// Commands the client sent since the last reset: every command counted,
/// less those the scripts ran on the server (each at most once per script
/// call; `GET` twice, a record under either key layout).
async fn client_commands(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let calls = redis_command_calls(con).await;
    let evalsha = calls.get("evalsha").copied().unwrap_or(0);
    for name in SCRIPT_COMMANDS.iter().filter(|n| **n != "set") {
        let most = if *name == "get" { 2 * evalsha } else { evalsha };
        assert!(
            calls.get(*name).copied().unwrap_or(0) <= most,
            "at most one {name} per script call: {calls:?}"
        );
    }
    let other: u64 = calls
        .iter()
        .filter(|(n, _)| n.as_str() != "evalsha" && !SCRIPT_COMMANDS.contains(&n.as_str()))
        .map(|(_, c)| c)
        .sum();
    assert_eq!(other, 0, "only EVALSHA was sent: {calls:?}");
    evalsha
}

#[tokio::test]
async fn commands_per_request() {
    let server = PrivateRedis::start(false);
    let store = RedisStore::connect(&server.url())
        .await
        .expect("private redis");
    let engine = Engine::new(store.clone());
    let mut con = redis_connection(&server.url()).await;
    // Load the scripts once (a fresh server answers NOSCRIPT first).
    engine
        .run(&call("warm-up"), |_| async { Ok::<_, Never>(0) })
        .await
        .expect("warm-up");
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut con)
        .await
        .expect("RESETSTAT");

    engine
        .run(&call("first"), |_| async { Ok::<_, Never>(1) })
        .await
        .expect("first");
    assert_eq!(
        client_commands(&mut con).await,
        2,
        "a first request: begin and complete"
    );

    let replay = engine
        .run(&call("first"), |_| async { Ok::<_, Never>(1) })
        .await
        .expect("replay");
    assert!(replay.is_replayed());
    assert_eq!(client_commands(&mut con).await, 3, "a replay: one begin");

    let held = call("held");
    let _ = idem_tests::claim(&store, &held, Duration::from_mins(1)).await;
    assert_eq!(client_commands(&mut con).await, 4);
    let dup = engine.run(&held, |_| async { Ok::<_, Never>(2) }).await;
    assert!(matches!(dup, Err(Error::InFlight { .. })), "{dup:?}");
    assert_eq!(
        client_commands(&mut con).await,
        5,
        "a duplicate in flight: one begin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_restarted_server_fails_closed_then_recovers_without_double_runs() {
    let mut server = PrivateRedis::start(true);
    let store = RedisStore::connect(&server.url())
        .await
        .expect("private redis")
        .with_timeout(Duration::from_millis(500));
    let engine = Engine::new(store).with_policy(Policy::default().lease(Duration::from_secs(30)));
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..30).map(|_| AtomicUsize::new(0)).collect());
    let run = |i: usize| {
        let (engine, runs) = (engine.clone(), Arc::clone(&runs));
        async move {
            engine
                .run(&call(&format!("req-{i}")), |_| async move {
                    runs[i].fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Never>(i)
                })
                .await
        }
    };

    // Requests 0..10 are served and recorded.
    for i in 0..10 {
        assert_eq!(run(i).await.expect("served"), Ran::Executed(i));
    }
    // Request 10 is in the middle of its operation when the server dies.
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let in_flight = {
        let (engine, runs) = (engine.clone(), Arc::clone(&runs));
        tokio::spawn(async move {
            engine
                .run(&call("req-10"), |_| async move {
                    runs[10].fetch_add(1, Ordering::SeqCst);
                    let _ = started_tx.send(());
                    let _ = finish_rx.await;
                    Ok::<_, Never>(10)
                })
                .await
        })
    };
    started_rx.await.expect("request 10 started");
    server.kill();
    let _ = finish_tx.send(());
    // Its operation ran; its result cannot be recorded now, and the caller is told it ran.
    assert_eq!(
        in_flight.await.expect("task").expect("answered"),
        Ran::Executed(10)
    );

    // While the server is down: requests fail closed, with a transient error, and run nothing.
    for i in (11..20).chain([0, 3]) {
        match run(i).await {
            Err(e @ Error::Store(_)) => {
                assert!(e.is_transient(), "a down store is a transient error: {e}");
            }
            other => panic!("request {i} while Redis is down must fail closed, got {other:?}"),
        }
    }
    for i in 11..20 {
        assert_eq!(
            runs[i].load(Ordering::SeqCst),
            0,
            "request {i} must not have run"
        );
    }

    // The server comes back (same port, same data); the same store works again.
    server.restart();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match run(11).await {
            Ok(_) => break,
            Err(e) if tokio::time::Instant::now() < deadline => {
                assert!(e.is_transient(), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the store did not recover after the restart: {e}"),
        }
    }
    for i in 12..20 {
        assert_eq!(
            run(i).await.expect("served after restart"),
            Ran::Executed(i)
        );
    }
    // Everything served before the crash replays; nothing runs twice.
    for i in 0..10 {
        assert_eq!(run(i).await.expect("replayed"), Ran::Replayed(i));
    }
    // Request 10's claim survived the crash, and the engine recorded its
    // result in the background once the server was back: a retry within its
    // lease is told it is in flight until then, and replays it after,
    // rather than running it a second time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match run(10).await {
            Ok(Ran::Replayed(10)) => break,
            Err(Error::InFlight { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("request 10 must replay its recorded result, got {other:?}"),
        }
    }
    for (i, n) in runs.iter().enumerate().take(20) {
        assert_eq!(
            n.load(Ordering::SeqCst),
            1,
            "request {i} ran {} times",
            n.load(Ordering::SeqCst)
        );
    }
}

#[tokio::test]
async fn connection_errors_never_show_the_connection_string() {
    // Nothing listens on port 1; the URL carries a password.
    let err = RedisStore::connect("redis://:s3cret-password@127.0.0.1:1/0")
        .await
        .expect_err("nothing listens there");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("s3cret-password"), "{shown}");
    assert!(shown.contains("cannot connect to Redis"), "{shown}");
    let bad = RedisStore::connect("rediss-nope://:s3cret-password@host")
        .await
        .expect_err("bad url");
    let shown = format!("{bad} {bad:?}");
    assert!(!shown.contains("s3cret-password"), "{shown}");
    let store = RedisStore::connect(&redis_url()).await.expect("redis");
    assert!(
        !format!("{store:?}").contains("127.0.0.1"),
        "Debug shows no address"
    );
}
