//! The durable mode (`RedisStore::with_replication`) under load: concurrent
//! charges share their waits for the replicas instead of queueing one
//! `WAIT` each behind the store's one connection (group commit), and each
//! charge still runs once and replays from any instance afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, Never, Ran};
use idem_redis::RedisStore;
use idem_tests::sentinel::{ask, PrivateSentinels, SERVICE};
use idem_tests::{call, Server};

async fn durable(topology: &PrivateSentinels, prefix: &str) -> RedisStore {
    RedisStore::connect_sentinel(topology.sentinel_urls(), SERVICE)
        .await
        .expect("the Sentinels name a primary")
        .with_prefix(prefix)
        .with_timeout(Duration::from_secs(5))
        .with_replication(1, Duration::from_secs(2))
}

/// How many `WAIT`s the server at `port` has run since its last reset.
fn waits(port: u16) -> u64 {
    let stats = ask(port, "INFO commandstats").expect("INFO commandstats");
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn sixty_four_charges_at_once_share_their_waits_and_each_runs_once(server: Server) {
    let topology = PrivateSentinels::start_on(server);
    let primary = topology.primary().expect("a primary");
    let (a, b) = (
        durable(&topology, "load:").await,
        durable(&topology, "load:").await,
    );
    let engine = Engine::new(a);
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..64).map(|_| AtomicUsize::new(0)).collect());
    ask(primary, "CONFIG RESETSTAT").expect("CONFIG RESETSTAT");

    let charges: Vec<_> = (0..64)
        .map(|i| {
            let (engine, runs) = (engine.clone(), Arc::clone(&runs));
            tokio::spawn(async move {
                engine
                    .run(&call("customers", &format!("charge-{i}")), |_| async move {
                        runs[i].fetch_add(1, Ordering::SeqCst);
                        Ok::<_, Never>(i)
                    })
                    .await
            })
        })
        .collect();
    for (i, charge) in charges.into_iter().enumerate() {
        let answer = charge.await.expect("task");
        assert_eq!(answer.expect("charged"), Ran::Executed(i), "charge {i}");
    }
    // 64 claims and 64 completions, each acknowledged by a replica: one WAIT
    // each would be 128.
    let waited = waits(primary);
    eprintln!("128 changes, {waited} WAITs");
    assert!(
        (1..=64).contains(&waited),
        "128 changes were covered by {waited} WAITs: they should share them"
    );

    // Another instance, on its own connection, replays every charge.
    let other = Engine::new(b);
    for i in 0..64 {
        let replay = other
            .run(&call("customers", &format!("charge-{i}")), |_| async move {
                Ok::<_, Never>(usize::MAX)
            })
            .await;
        assert_eq!(replay.expect("replayed"), Ran::Replayed(i));
        assert_eq!(runs[i].load(Ordering::SeqCst), 1, "charge {i} ran twice");
    }
}

idem_tests::on_redis_and_valkey!(sixty_four_charges_at_once_share_their_waits_and_each_runs_once);
