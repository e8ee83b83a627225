//! A Redis that may evict idem's records breaks the promise silently: the
//! record of a debit is evicted, its retry runs the debit again. The store
//! refuses such a server unless told to accept it, stops taking new work if
//! the policy changes to one later, counts what the server evicted, and on
//! a full `noeviction` server (the safe policy) refuses new work while still
//! answering the retries of work it recorded. On Redis 7.0 and Valkey 8.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use idem_core::store::Begin;
use idem_core::{Engine, Error, Never, Outcome, Ran, Store, StoreErrorKind};
use idem_redis::{ConnectError, RedisStore};
use idem_tests::sentinel::ask;
use idem_tests::{call, claim, PrivateRedis, Server};

const EVICTING: [&str; 7] = [
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
];

fn config(server: &PrivateRedis, setting: &str, value: &str) {
    let reply = ask(server.port(), &format!("CONFIG SET {setting} {value}")).unwrap_or_default();
    assert!(
        reply.starts_with("+OK"),
        "CONFIG SET {setting} {value}: {reply}"
    );
}

/// The debit of `key`, counting how many times it ran.
async fn debit(engine: &Engine, ran: &AtomicUsize, key: &str) -> Result<Ran<String>, Error<Never>> {
    engine
        .run(&call("accounts", key), |_claim| async move {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Never>(format!("receipt for {key}"))
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_may_evict_records_is_refused_at_connect_unless_accepted() {
    for kind in Server::ALL {
        let server = PrivateRedis::start_on(kind, false);
        for policy in EVICTING {
            config(&server, "maxmemory-policy", policy);
            match RedisStore::connect(&server.url()).await {
                Err(e @ ConnectError::EvictionPolicy { .. }) => {
                    let message = e.to_string();
                    assert!(
                        message.contains(policy) && message.contains("noeviction") && message.contains("accept_eviction"),
                        "{kind:?} {policy}: the error names the policy and both ways out: {message}"
                    );
                }
                other => panic!(
                    "{kind:?} {policy}: connected to a server that may evict records: {other:?}"
                ),
            }
            RedisStore::connector()
                .accept_eviction()
                .connect(&server.url())
                .await
                .unwrap_or_else(|e| panic!("{kind:?} {policy}: accepted knowingly: {e}"));
        }
        config(&server, "maxmemory-policy", "noeviction");
        RedisStore::connect(&server.url())
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: noeviction keeps every record: {e}"));
    }
}

/// Writes filler keys (as another application sharing the server would)
/// until the server has evicted `record`.
async fn fill_until_evicted(server: &PrivateRedis, record: &str) {
    let mut connection = idem_tests::redis_connection(&server.url()).await;
    let value = vec![b'x'; 1024];
    for batch in 0..200 {
        let mut pipe = redis::pipe();
        for i in 0..1000 {
            pipe.set(format!("filler:{batch}:{i}"), &value).ignore();
        }
        let _: () = pipe.query_async(&mut connection).await.expect("filler");
        let exists: bool = redis::cmd("EXISTS")
            .arg(record)
            .query_async(&mut connection)
            .await
            .expect("EXISTS");
        if !exists {
            return;
        }
    }
    panic!("{record} was not evicted by 200 MB of filler");
}

/// The story: a debit recorded, then the server's policy changed
/// to one that evicts and the server filled until the record was evicted;
/// the debit's retry is answered with its record or refused, never run
/// again, and the evictions are counted.
async fn a_debit_on_a_redis_that_starts_evicting_is_never_run_twice(kind: Server) {
    let server = PrivateRedis::start_on(kind, false);
    let store = RedisStore::connect(&server.url())
        .await
        .expect("noeviction");
    let engine = Engine::new(store.clone());
    let ran = AtomicUsize::new(0);
    let first = debit(&engine, &ran, "debit-1").await;
    assert!(matches!(first, Ok(Ran::Executed(_))), "{first:?}");

    config(&server, "maxmemory-policy", "allkeys-lru");
    // Within a few seconds of use the store reads the new policy and
    // refuses new work (each probe a new key, which runs until then).
    let deadline = Instant::now() + Duration::from_secs(15);
    let probes = AtomicUsize::new(0);
    loop {
        let n = probes.load(Ordering::SeqCst);
        match debit(&engine, &probes, &format!("probe-{n}")).await {
            Ok(Ran::Executed(_)) => {}
            Err(Error::Store(e)) => {
                let message = e.to_string();
                assert!(
                    message.contains("allkeys-lru") && message.contains("noeviction"),
                    "{kind:?}: {message}"
                );
                break;
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "{kind:?}: new work still taken on an evicting server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Room for a few megabytes more, then the least recently used go.
    let used: u64 = ask(server.port(), "INFO memory")
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("used_memory:").map(|v| v.trim().to_owned()))
        })
        .and_then(|v| v.parse().ok())
        .expect("used_memory");
    config(&server, "maxmemory", &(used + 4 * 1024 * 1024).to_string());
    fill_until_evicted(&server, &store.key(call("accounts", "debit-1").record_id())).await;

    // The record is gone: its retry is refused for the policy (or by the
    // record's trace, when the filler evicted the record and not its
    // trace), never run, and within a few seconds the evictions are counted.
    let deadline = Instant::now() + Duration::from_secs(15);
    while store.evictions_seen() == 0 {
        match debit(&engine, &ran, "debit-1").await {
            Err(Error::Store(e)) => assert!(e.to_string().contains("allkeys-lru"), "{kind:?}: {e}"),
            Err(Error::Expired) => {}
            other => panic!("{kind:?}: the retry of the evicted debit-1: {other:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "{kind:?}: evictions never counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "{kind:?}: debit-1 ran again after its record was evicted"
    );
}

/// A full `noeviction` server: new keys refused as full, a recorded key
/// replayed byte for byte, a claim taken before it filled still recorded.
async fn a_full_redis_refuses_new_work_and_still_answers_recorded_work(kind: Server) {
    let server = PrivateRedis::start_on(kind, false);
    let store = RedisStore::connect(&server.url())
        .await
        .expect("noeviction");
    let engine = Engine::new(store.clone());
    let ran = AtomicUsize::new(0);
    let recorded = debit(&engine, &ran, "recorded").await;
    assert!(matches!(recorded, Ok(Ran::Executed(_))), "{recorded:?}");
    let running = call("accounts", "running");
    let lease = claim(&store, &running, Duration::from_secs(30)).await;
    // A debit recorded for a moment only: its trace outlives it.
    let brief = call("accounts", "brief");
    let brief_lease = claim(&store, &brief, Duration::from_secs(30)).await;
    store
        .complete(
            brief.record_id(),
            &brief_lease,
            &Outcome::new(b"receipt for brief".to_vec()),
            Duration::from_millis(1),
        )
        .await
        .expect("complete");

    config(&server, "maxmemory", "1");
    match debit(&engine, &ran, "new").await {
        Err(Error::Store(e)) => {
            assert_eq!(e.kind(), StoreErrorKind::Full, "{kind:?}: {e}");
            assert!(e.to_string().contains("full"), "{kind:?}: {e}");
        }
        other => panic!("{kind:?}: a new key on a full server: {other:?}"),
    }
    match debit(&engine, &ran, "recorded").await {
        Ok(Ran::Replayed(receipt)) => assert_eq!(receipt, "receipt for recorded"),
        other => panic!("{kind:?}: the retry of recorded work on a full server: {other:?}"),
    }
    let in_flight = store
        .begin(running.record_id(), running.fingerprint(), lease.duration)
        .await;
    assert!(
        matches!(in_flight, Ok(Begin::InFlight { .. })),
        "{kind:?}: {in_flight:?}"
    );
    // The work begun before the server filled is recorded all the same:
    // refusing it would leave its retry to run it again after the lease.
    let receipt = Outcome::new(b"receipt for running".to_vec());
    store
        .complete(
            running.record_id(),
            &lease,
            &receipt,
            Duration::from_mins(1),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: completing on a full server: {e}"));
    match store
        .begin(running.record_id(), running.fingerprint(), lease.duration)
        .await
    {
        Ok(Begin::Replay(outcome)) => assert_eq!(outcome.as_bytes(), receipt.as_bytes()),
        other => panic!("{kind:?}: {other:?}"),
    }
    // A late retry is refused from the record's trace on a full server too.
    let late = store
        .begin(brief.record_id(), brief.fingerprint(), lease.duration)
        .await;
    assert!(matches!(late, Ok(Begin::Expired)), "{kind:?}: {late:?}");
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "{kind:?}: only the first debit ran"
    );
}

idem_tests::on_redis_and_valkey!(
    a_debit_on_a_redis_that_starts_evicting_is_never_run_twice,
    a_full_redis_refuses_new_work_and_still_answers_recorded_work,
);
