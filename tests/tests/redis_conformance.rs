//! The store conformance kit against real Redis: the local server, Valkey 8,
//! and the Redis and Valkey Clusters that `scripts/services.sh` starts
//! (three primaries, a replica each), as is and with the durability setting.
//! Every test uses its own key prefix.

use idem_redis::RedisStore;
use idem_tests::{redis_cluster_nodes, redis_url, unique_prefix};

mod single {
    use super::{redis_url, unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect(&redis_url())
            .await
            .expect("Redis at IDEM_TEST_REDIS_URL (default redis://127.0.0.1:6379)")
            .with_prefix(&unique_prefix("conformance"))
    });
}

mod valkey {
    use super::{unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect(&idem_tests::valkey_url())
            .await
            .expect("Valkey at IDEM_TEST_VALKEY_URL (default redis://127.0.0.1:6380)")
            .with_prefix(&unique_prefix("conformance"))
    });
}

mod valkey_cluster {
    use super::{unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect_cluster(idem_tests::valkey_cluster_nodes())
            .await
            .expect("Valkey Cluster at IDEM_TEST_VALKEY_CLUSTER (default 127.0.0.1:7501-7503)")
            .with_prefix(&unique_prefix("conformance"))
    });
}

mod valkey_cluster_replicated {
    use std::time::Duration;

    use super::{unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect_cluster(idem_tests::valkey_cluster_nodes())
            .await
            .expect("Valkey Cluster at IDEM_TEST_VALKEY_CLUSTER (default 127.0.0.1:7501-7503)")
            .with_prefix(&unique_prefix("conformance"))
            .with_replication(1, Duration::from_millis(500))
    });
}

mod cluster {
    use super::{redis_cluster_nodes, unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect_cluster(redis_cluster_nodes())
            .await
            .expect("Redis Cluster at IDEM_TEST_REDIS_CLUSTER (default 127.0.0.1:7301-7303)")
            .with_prefix(&unique_prefix("conformance"))
    });
}

mod cluster_replicated {
    use std::time::Duration;

    use super::{redis_cluster_nodes, unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect_cluster(redis_cluster_nodes())
            .await
            .expect("Redis Cluster at IDEM_TEST_REDIS_CLUSTER (default 127.0.0.1:7301-7303)")
            .with_prefix(&unique_prefix("conformance"))
            .with_replication(1, Duration::from_millis(500))
    });
}

/// A store with the replay cache, once its wake channel is subscribed, so
/// that the checks meet the cache and not only Redis.
async fn cached_store() -> RedisStore {
    use std::time::Duration;

    let prefix = unique_prefix("conformance");
    let store = RedisStore::connect(&redis_url())
        .await
        .expect("Redis at IDEM_TEST_REDIS_URL (default redis://127.0.0.1:6379)")
        .with_prefix(&prefix)
        .with_replay_cache(1 << 20, Duration::from_mins(1));
    // The first begin subscribes.
    let warm_up = idem_tests::call("conformance", "warm-up");
    idem_tests::claim(&store, &warm_up, Duration::from_secs(1)).await;
    let mut con = idem_tests::redis_connection(&redis_url()).await;
    for _ in 0..200 {
        let subscribed: (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(format!("{prefix}wake"))
            .query_async(&mut con)
            .await
            .expect("PUBSUB NUMSUB");
        if subscribed.1 > 0 {
            // The subscription's confirmation reaches the store just after.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return store;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the store's wake channel was not subscribed within 2 s");
}

mod single_with_replay_cache {
    use super::cached_store;

    idem_core::store_conformance_tests!(cached_store);
}

mod single_compact_keys {
    use super::{redis_url, unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect(&redis_url())
            .await
            .expect("Redis at IDEM_TEST_REDIS_URL (default redis://127.0.0.1:6379)")
            .with_prefix(&unique_prefix("conformance"))
            .with_key_layout(idem_redis::KeyLayout::Compact)
    });
}

mod cluster_compact_keys {
    use super::{redis_cluster_nodes, unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect_cluster(redis_cluster_nodes())
            .await
            .expect("Redis Cluster at IDEM_TEST_REDIS_CLUSTER (default 127.0.0.1:7301-7303)")
            .with_prefix(&unique_prefix("conformance"))
            .with_key_layout(idem_redis::KeyLayout::Compact)
    });
}
