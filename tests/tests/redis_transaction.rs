//! `RedisTransaction` against real Redis and a real Redis Cluster: writes
//! that land with their record, only while the claim holds, only if what
//! was read is unchanged, once even if the commit is sent again, and on a
//! cluster only in the record's slot.

use std::time::Duration;

use idem_core::{
    encode_result, Call, CommitError, Engine, Never, Policy, Ran, Store, StoreErrorKind,
};
use idem_redis::{KeyLayout, RedisStore};
use idem_tests::{redis_cluster_nodes, unique_prefix, valkey_cluster_nodes, Server};

async fn store(url: &str) -> (RedisStore, String) {
    let prefix = unique_prefix("redis-tx");
    let store = RedisStore::connect(url)
        .await
        .expect("redis")
        .with_prefix(&format!("{prefix}idem:"));
    (store, prefix)
}

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    idem_tests::redis_connection(url).await
}

async fn get(url: &str, key: &str) -> Option<String> {
    redis::AsyncCommands::get(&mut raw(url).await, key)
        .await
        .expect("GET")
}

fn call(key: &str) -> Call {
    idem_tests::call("redis-tx", key)
}

async fn a_write_whose_read_changed_is_refused_whole_and_the_reread_lands(server: Server) {
    let url = &server.url();
    let (store, prefix) = store(url).await;
    let balance = format!("{prefix}balance");
    let engine = Engine::new(store.clone());
    let attempts = engine
        .run(&call("conflict"), |claim| {
            let (store, balance) = (store.clone(), balance.clone());
            async move {
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    let mut tx = store.transaction();
                    let seen = tx.get(&balance).await.expect("GET");
                    if attempts == 1 {
                        // Another debit lands between the read and the commit.
                        let _: () = redis::AsyncCommands::set(&mut raw(url).await, &balance, "70")
                            .await
                            .expect("SET");
                    }
                    let after = seen.map_or(100, |b| {
                        String::from_utf8_lossy(&b).parse::<u64>().expect("number")
                    }) - 10;
                    tx.set(balance.as_str(), after.to_string());
                    tx.set(format!("{prefix}other"), "written");
                    let outcome = encode_result(&Ok::<_, Never>(after)).expect("encode");
                    match claim.commit(tx, &outcome).await {
                        Ok(()) => return Ok::<_, Never>(attempts),
                        Err(e @ CommitError::Conflict(_)) => {
                            assert!(e.to_string().contains(&balance), "{e}");
                            // Nothing of the refused transaction landed.
                            assert_eq!(get(url, &format!("{prefix}other")).await, None);
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        })
        .await
        .expect("run");
    assert_eq!(attempts, Ran::Executed(2));
    assert_eq!(get(url, &balance).await.as_deref(), Some("60"));
}

async fn a_commit_sent_again_for_the_same_claim_applies_nothing_twice(server: Server) {
    let url = &server.url();
    let (store, prefix) = store(url).await;
    let counter = format!("{prefix}counter");
    let engine = Engine::new(store.clone());
    engine
        .run(&call("twice"), |claim| {
            let (store, counter) = (store.clone(), counter.clone());
            async move {
                let outcome = encode_result(&Ok::<_, Never>(1)).expect("encode");
                let mut tx = store.transaction();
                tx.set(counter.as_str(), "1");
                claim.commit(tx, &outcome).await.expect("first commit");
                // As a client whose first EXEC answer was lost sends it again.
                let mut again = store.transaction();
                again.set(counter.as_str(), "2");
                let resent = idem_core::StoreTransaction::complete(
                    &mut again,
                    claim.record_id(),
                    claim.lease(),
                    &outcome,
                    claim.ttl(),
                )
                .await;
                assert!(resent.is_ok());
                idem_core::StoreTransaction::commit(again)
                    .await
                    .expect("answered as committed");
                Ok::<_, Never>(1)
            }
        })
        .await
        .expect("run");
    assert_eq!(
        get(url, &counter).await.as_deref(),
        Some("1"),
        "applied once"
    );
}

async fn a_holder_whose_lease_ran_out_writes_nothing(server: Server) {
    let url = &server.url();
    let (store, prefix) = store(url).await;
    let key = format!("{prefix}late");
    let engine =
        Engine::new(store.clone()).with_policy(Policy::default().lease(Duration::from_millis(200)));
    let lost = engine
        .run(&call("late"), |claim| {
            let (store, key) = (store.clone(), key.clone());
            async move {
                // Stalled past the lease, renewals and all (a frozen process).
                std::thread::sleep(Duration::from_millis(400));
                let mut tx = store.transaction();
                tx.set(key, "late");
                let outcome = encode_result(&Ok::<_, Never>(0)).expect("encode");
                Ok::<_, Never>(claim.commit(tx, &outcome).await.is_err())
            }
        })
        .await;
    assert!(matches!(lost, Ok(Ran::Executed(true))), "{lost:?}");
    assert_eq!(get(url, &key).await, None, "the late write never landed");
}

idem_tests::on_redis_and_valkey!(
    a_write_whose_read_changed_is_refused_whole_and_the_reread_lands,
    a_commit_sent_again_for_the_same_claim_applies_nothing_twice,
    a_holder_whose_lease_ran_out_writes_nothing
);

/// The shared cluster of `server` (`scripts/services.sh`).
fn cluster_nodes(server: Server) -> Vec<String> {
    match server {
        Server::Redis => redis_cluster_nodes(),
        Server::Valkey => valkey_cluster_nodes(),
    }
}

async fn on_a_cluster_keys_outside_the_record_slot_are_refused_and_tagged_keys_commit(
    server: Server,
) {
    // Under either key layout: the record's two keys and its tagged keys
    // share one slot.
    for layout in [KeyLayout::Hex, KeyLayout::Compact] {
        refused_outside_and_committed_inside_the_slot(server, layout).await;
    }
}

async fn refused_outside_and_committed_inside_the_slot(server: Server, layout: KeyLayout) {
    let prefix = unique_prefix("redis-tx-cluster");
    let store = RedisStore::connect_cluster(cluster_nodes(server))
        .await
        .expect("redis cluster")
        .with_prefix(&format!("{prefix}idem:"))
        .with_key_layout(layout);
    let engine = Engine::new(store.clone());
    let c = call("cluster");
    let refused = engine
        .run(&c, |claim| {
            let store = store.clone();
            let untagged = format!("{prefix}balance");
            async move {
                let outcome = encode_result(&Ok::<_, Never>(0)).expect("encode");
                let mut tx = store.transaction();
                tx.set(untagged.as_str(), "1");
                let refused = claim.commit(tx, &outcome).await;
                let message = match refused {
                    Err(CommitError::RolledBack(e)) => {
                        assert_eq!(e.kind(), StoreErrorKind::Unsupported);
                        e.to_string()
                    }
                    other => panic!("expected a refusal, got {other:?}"),
                };
                Ok::<_, Never>(message)
            }
        })
        .await
        .expect("run");
    let Ran::Executed(message) = refused else {
        panic!("{refused:?}")
    };
    assert!(message.contains(&format!("{prefix}balance")), "{message}");
    assert!(message.contains("tagged_key"), "{message}");
    // The refusal released the claim: the retry runs, in the record's slot.
    let tagged = engine
        .run(&c, |claim| {
            let store = store.clone();
            async move {
                let key = store.tagged_key(claim.record_id(), "balance");
                let mut tx = store.transaction();
                tx.set(key.as_str(), "1");
                let outcome = encode_result(&Ok::<_, Never>(key.clone())).expect("encode");
                claim
                    .commit(tx, &outcome)
                    .await
                    .expect("commit in the slot");
                Ok::<_, Never>(key)
            }
        })
        .await
        .expect("run");
    let Ran::Executed(key) = tagged else {
        panic!("{tagged:?}")
    };
    let cluster = redis::cluster::ClusterClient::new(cluster_nodes(server)).expect("cluster");
    let mut con = cluster.get_async_connection().await.expect("connection");
    let value: Option<String> = redis::AsyncCommands::get(&mut con, &key)
        .await
        .expect("GET");
    assert_eq!(value.as_deref(), Some("1"));
    let _ = store.remove(c.record_id(), true).await;
}

idem_tests::on_redis_and_valkey!(
    on_a_cluster_keys_outside_the_record_slot_are_refused_and_tagged_keys_commit
);
