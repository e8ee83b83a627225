//! Redis behind Sentinel, as managed Redis runs it: a primary, two replicas,
//! three Sentinels (a topology of each test's own), the primary killed while
//! two instances serve operations whose effects are kept outside Redis, so
//! that a record lost in the failover shows as a second effect. Replication
//! lag is made a decision, not luck: what the primary sends its replicas is
//! held back while it acknowledges.
//!
//! With `with_replication`: no double effect, none lost, and what was not
//! replicated was answered `store-unavailable` and never ran. Without it:
//! every operation acknowledged during the lag runs again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use idem_core::{Call, Engine, Error, Fingerprint, IdempotencyKey, Never, Policy, Ran, Store};
use idem_redis::RedisStore;
use idem_tests::cluster::PrivateCluster;
use idem_tests::sentinel::{ask, PrivateSentinels, SERVICE};
use idem_tests::Server;

/// How many times each key's operation ran.
#[derive(Clone, Default)]
struct Effects(Arc<Mutex<HashMap<String, usize>>>);

impl Effects {
    fn ran(&self, key: &str) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_owned())
            .or_default() += 1;
    }

    fn of(&self, key: &str) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

async fn instance(topology: &PrivateSentinels, durable: bool) -> Engine {
    let store = RedisStore::connect_sentinel(topology.sentinel_urls(), SERVICE)
        .await
        .expect("the Sentinels name a primary")
        .with_prefix("failover:")
        .with_timeout(Duration::from_secs(1));
    let store = if durable {
        store.with_replication(1, Duration::from_millis(200))
    } else {
        store
    };
    Engine::new(store).with_policy(Policy::default().lease(Duration::from_secs(5)))
}

fn call(key: &str) -> Call {
    Call::new(
        "accounts",
        IdempotencyKey::parse(key).expect("key"),
        Fingerprint::of("debit", &100u64).expect("fingerprint"),
    )
}

/// One attempt of the operation for `key` on `engine`.
async fn attempt(engine: &Engine, effects: &Effects, key: &str) -> Result<Ran<u64>, Error<Never>> {
    engine
        .run(&call(key), |_claim| async move {
            effects.ran(key);
            Ok::<_, Never>(100)
        })
        .await
}

/// What a failover did to the operations.
#[derive(Debug, Default)]
struct Tally {
    /// Keys whose operation ran more than once.
    doubled: usize,
    /// Keys whose operation never ran.
    lost: usize,
    /// Attempts answered unavailable (nothing ran).
    unavailable: usize,
}

/// Twenty operations before the lag, twenty during it (replication held),
/// the primary killed, a replica promoted, then every key retried until it
/// gets an answer, alternating between two instances, as clients whose
/// answers were lost would.
async fn failover_story(durable: bool) -> Tally {
    failover_story_on(durable, Server::Redis).await
}

/// The same on `server`.
async fn failover_story_on(durable: bool, server: Server) -> Tally {
    let mut topology = PrivateSentinels::start_on(server);
    let mut load = Load::new([
        instance(&topology, durable).await,
        instance(&topology, durable).await,
    ]);
    load.before_the_lag().await;
    // "Replicated as usual": Redis replicates asynchronously, and on a busy
    // machine the last of the twenty may not have reached the replicas yet.
    let primary = topology.primary().expect("a primary");
    replicated(primary, 2);
    topology.hold_replication(true);
    load.during_the_lag(durable).await;
    let old = topology.kill_primary();
    topology.wait_for_promotion(old);
    load.after_the_failover().await;
    load.tally()
}

/// Waits until the primary on `port` knows `replicas` replicas have all it
/// wrote (`WAIT`); panics after about 4 s.
fn replicated(port: u16, replicas: u32) {
    let all = format!(":{replicas}");
    for _ in 0..10 {
        if ask(port, &format!("WAIT {replicas} 400")).is_some_and(|r| r.trim() == all) {
            return;
        }
    }
    panic!("the primary on {port} did not reach {replicas} replicas within 4 s");
}

/// Forty operations (`debit-0` to `debit-39`) on two instances, their
/// effects counted outside Redis.
struct Load {
    engines: [Engine; 2],
    effects: Effects,
    keys: Vec<String>,
    tally: Tally,
}

impl Load {
    fn new(engines: [Engine; 2]) -> Self {
        Self {
            engines,
            effects: Effects::default(),
            keys: (0..40).map(|i| format!("debit-{i}")).collect(),
            tally: Tally::default(),
        }
    }

    /// The first twenty, one by one, replicated as usual.
    async fn before_the_lag(&self) {
        for (i, key) in self.keys[..20].iter().enumerate() {
            let answer = attempt(&self.engines[i % 2], &self.effects, key).await;
            assert!(
                matches!(answer, Ok(Ran::Executed(100))),
                "{key}: {answer:?}"
            );
        }
    }

    /// The other twenty at once, while replication is held back: run
    /// without the setting, refused (nothing run) with it.
    async fn during_the_lag(&mut self, durable: bool) {
        let during = futures_util::future::join_all(
            self.keys[20..]
                .iter()
                .enumerate()
                .map(|(i, key)| attempt(&self.engines[i % 2], &self.effects, key)),
        )
        .await;
        for answer in &during {
            match answer {
                Ok(Ran::Executed(100)) => assert!(!durable, "acted on an unreplicated claim"),
                // Not replicated in time, or no answer in time: nothing ran.
                Err(Error::Store(e)) => {
                    assert!(durable, "{e}");
                    self.tally.unavailable += 1;
                }
                other => panic!("during the lag: {other:?}"),
            }
        }
        if durable {
            let ran: usize = self.keys[20..].iter().map(|k| self.effects.of(k)).sum();
            assert_eq!(ran, 0, "nothing runs on a claim the replicas do not have");
        }
    }

    /// Every key retried until it gets an answer, alternating instances.
    async fn after_the_failover(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for (i, key) in self.keys.iter().enumerate() {
            let mut n = i;
            loop {
                match attempt(&self.engines[n % 2], &self.effects, key).await {
                    Ok(Ran::Executed(100) | Ran::Replayed(100)) => break,
                    Err(Error::Store(_) | Error::InFlight { .. }) => self.tally.unavailable += 1,
                    other => panic!("{key}: {other:?}"),
                }
                assert!(
                    Instant::now() < deadline,
                    "{key}: no answer after the failover"
                );
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// How many ran twice, and never.
    fn tally(mut self) -> Tally {
        for key in &self.keys {
            match self.effects.of(key) {
                0 => self.tally.lost += 1,
                1 => {}
                _ => self.tally.doubled += 1,
            }
        }
        self.tally
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replication_a_failover_mid_load_doubles_nothing_and_loses_nothing() {
    let tally = failover_story(true).await;
    assert_eq!((tally.doubled, tally.lost), (0, 0), "{tally:?}");
    assert!(
        tally.unavailable >= 20,
        "the twenty attempts during the lag were refused: {tally:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_with_replication_a_failover_mid_load_doubles_nothing_and_loses_nothing() {
    let tally = failover_story_on(true, Server::Valkey).await;
    assert_eq!((tally.doubled, tally.lost), (0, 0), "{tally:?}");
    assert!(
        tally.unavailable >= 20,
        "the twenty attempts during the lag were refused: {tally:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_replication_every_operation_acknowledged_during_the_lag_runs_again() {
    let tally = failover_story(false).await;
    // The measure the README quotes: all twenty acknowledged by the primary
    // alone were lost with it, and their retries ran them again.
    assert_eq!((tally.doubled, tally.lost), (20, 0), "{tally:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_after_a_failover_gets_a_greater_token_replicated_or_not() {
    let mut topology = PrivateSentinels::start();
    let store = RedisStore::connect_sentinel(topology.sentinel_urls(), SERVICE)
        .await
        .expect("primary")
        .with_prefix("tokens:")
        .with_timeout(Duration::from_secs(1));
    let durable = store
        .clone()
        .with_replication(1, Duration::from_millis(500));
    let (replicated, lost) = (call("replicated"), call("lost"));
    let lease = Duration::from_millis(300);
    let begin = |store: RedisStore, call: Call| async move {
        match store
            .begin(call.record_id(), call.fingerprint(), lease)
            .await
        {
            Ok(idem_core::store::Begin::Acquired(l)) => l.token,
            other => panic!("{other:?}"),
        }
    };
    let first_replicated = begin(durable.clone(), replicated.clone()).await;
    topology.hold_replication(true);
    let first_lost = begin(store.clone(), lost.clone()).await;
    let old = topology.kill_primary();
    topology.wait_for_promotion(old);
    tokio::time::sleep(lease).await;
    let retry = |store: RedisStore, call: Call| async move {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match store
                .begin(call.record_id(), call.fingerprint(), lease)
                .await
            {
                Ok(idem_core::store::Begin::Acquired(l)) => return l.token,
                other => assert!(Instant::now() < deadline, "{other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    // The record came through the failover: its token + 1 at least.
    assert!(retry(durable, replicated).await > first_replicated);
    // The record was lost: a token from the new primary's clock, greater
    // because that clock is past the old primary's at the first claim.
    assert!(retry(store, lost).await > first_lost);
}

/// The same story on a Redis Cluster (three primaries, a replica each): the
/// replication of every shard held back, twenty operations, one primary
/// killed, its replica promoted by the cluster, every key retried. Returns
/// the tally and how many of the twenty lived on the killed primary.
async fn cluster_failover_story(durable: bool, server: Server) -> (Tally, usize) {
    let mut cluster = PrivateCluster::start_on(server);
    let mut stores = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect_cluster(cluster.node_urls())
            .await
            .expect("the cluster")
            .with_prefix("failover:")
            .with_timeout(Duration::from_secs(1));
        stores.push(if durable {
            store.with_replication(1, Duration::from_millis(200))
        } else {
            store
        });
    }
    let store = stores[0].clone();
    let engine =
        |s: RedisStore| Engine::new(s).with_policy(Policy::default().lease(Duration::from_secs(5)));
    let mut load = Load::new([engine(stores[0].clone()), engine(stores[1].clone())]);
    load.before_the_lag().await;
    for shard in 0..3 {
        replicated(cluster.primary_port(shard), 1);
    }
    cluster.hold_replication(true);
    load.during_the_lag(durable).await;
    // Which of the twenty live on the primary about to die.
    let doomed = cluster.primary_port(0);
    let on_doomed = load.keys[20..]
        .iter()
        .filter(|key| {
            let record = store.key(call(key).record_id());
            ask(doomed, &format!("EXISTS {record}")).is_some_and(|r| r.starts_with(":1"))
        })
        .count();
    let successor = cluster.kill_primary(0);
    cluster.hold_replication(false);
    cluster.wait_for_promotion(successor);
    // Its shard has no replica left: with the setting it refuses changes
    // until one is back, as here the old node, rejoining as a replica.
    cluster.restart_as_replica(0);
    load.after_the_failover().await;
    (load.tally(), on_doomed)
}

async fn on_a_cluster_with_replication_a_shard_failover_doubles_nothing_and_loses_nothing(
    server: Server,
) {
    let (tally, _) = cluster_failover_story(true, server).await;
    assert_eq!((tally.doubled, tally.lost), (0, 0), "{tally:?}");
}

async fn on_a_cluster_without_replication_the_killed_shard_s_acknowledged_operations_run_again(
    server: Server,
) {
    let (tally, on_doomed) = cluster_failover_story(false, server).await;
    assert!(
        on_doomed > 0,
        "some of the twenty lived on the killed primary"
    );
    assert_eq!(
        (tally.doubled, tally.lost),
        (on_doomed, 0),
        "every operation the killed primary alone had acknowledged ran again: {tally:?}"
    );
}

idem_tests::on_redis_and_valkey!(
    on_a_cluster_with_replication_a_shard_failover_doubles_nothing_and_loses_nothing,
    on_a_cluster_without_replication_the_killed_shard_s_acknowledged_operations_run_again
);
