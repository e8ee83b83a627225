//! The durable mode (`RedisStore::with_replication`) promises that no answer
//! of `begin` is acted on before a replica has the record it came from, so
//! that a failover never takes back what a client was told. On Redis 7.2+
//! and Valkey 8, `WAIT` covers only what its own connection wrote: a retry
//! on another instance that merely reads the first one's completion would
//! be answered at once, from a record no replica has.
//!
//! The story, on Redis 7.0 and on Valkey 8.1: instance A completes a charge
//! while replication is held back (its completion is not acted on), and
//! instance B, on its own connection, is asked for the charge twice: as a
//! retry, and as a duplicate that was waiting for A. Then the primary dies
//! and a replica without the completion is promoted. B must not have
//! answered either from the completion the failover lost.

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Engine, Error, Never, OnInFlight, Outcome, Policy, Ran, Store};
use idem_redis::RedisStore;
use idem_tests::sentinel::{ask, PrivateSentinels, SERVICE};
use idem_tests::{call, claim, Server};

const PREFIX: &str = "durable:";

async fn durable(topology: &PrivateSentinels) -> RedisStore {
    RedisStore::connect_sentinel(topology.sentinel_urls(), SERVICE)
        .await
        .expect("the Sentinels name a primary")
        .with_prefix(PREFIX)
        .with_timeout(Duration::from_secs(1))
        .with_replication(1, Duration::from_millis(200))
}

/// Waits until someone listens on the store's wake channel on `primary`.
async fn subscribed(primary: u16) {
    let listening = || {
        ask(primary, &format!("PUBSUB NUMSUB {PREFIX}wake"))
            .is_some_and(|r| r.trim_end().ends_with(":1") || r.trim_end().ends_with(":2"))
    };
    for _ in 0..200 {
        if listening() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("nobody subscribed to {PREFIX}wake on {primary} within 2 s");
}

async fn a_retry_is_never_answered_from_a_completion_the_failover_loses(server: Server) {
    let mut topology = PrivateSentinels::start_on(server);
    let (a, b) = (durable(&topology).await, durable(&topology).await);
    let lease = Duration::from_secs(20);
    let (retried, waiting) = (call("charges", "retried"), call("charges", "waiting"));
    let lease_retried = claim(&a, &retried, lease).await;
    let lease_waiting = claim(&a, &waiting, lease).await;

    // B is asked for the second charge while A runs it, and waits for A.
    let engine_b =
        Engine::new(b.clone()).with_policy(Policy::default().on_in_flight(OnInFlight::Wait {
            max: Duration::from_secs(8),
        }));
    let duplicate = tokio::spawn({
        let waiting = waiting.clone();
        async move {
            engine_b
                .run(&waiting, |_claim| async {
                    Ok::<_, Never>(String::from("ran on B"))
                })
                .await
        }
    });
    let primary = topology.primary().expect("a primary");
    subscribed(primary).await;

    // A completes both while nothing reaches the replicas: not acted on.
    topology.hold_replication(true);
    let receipt = Outcome::new(b"receipt".to_vec());
    let ttl = Duration::from_mins(1);
    for (c, l) in [(&retried, &lease_retried), (&waiting, &lease_waiting)] {
        let completed = a.complete(c.record_id(), l, &receipt, ttl).await;
        assert!(
            completed.is_err(),
            "{server:?}: acted on an unreplicated completion"
        );
    }

    // B, on its own connection, as a retry and as the woken duplicate.
    let retry = b
        .begin(retried.record_id(), retried.fingerprint(), lease)
        .await;
    assert!(
        !matches!(retry, Ok(Begin::Replay(_))),
        "{server:?}: a retry was answered from a completion no replica has: {retry:?}"
    );
    let woken = duplicate.await.expect("the duplicate's task");
    assert!(
        !matches!(woken, Ok(Ran::Replayed(_))),
        "{server:?}: a waiting duplicate was answered from a completion no replica has: {woken:?}"
    );
    assert!(
        matches!(woken, Err(Error::Store(_))),
        "{server:?}: the waiting duplicate is told the store could not vouch for the record: {woken:?}"
    );

    // The failover loses both completions: what B did not serve.
    let old = topology.kill_primary();
    let promoted = topology.wait_for_promotion(old);
    for c in [&retried, &waiting] {
        let value = ask(promoted, &format!("GET {}", a.key(c.record_id()))).unwrap_or_default();
        assert!(
            value.lines().nth(1).is_some_and(|v| v.starts_with('F')),
            "{server:?}: the promoted replica still has the charge in flight, not completed: {value:?}"
        );
    }
}

idem_tests::on_redis_and_valkey!(a_retry_is_never_answered_from_a_completion_the_failover_loses);
