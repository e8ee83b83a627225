//! The store conformance kit against real Redis: the local server, and the
//! Redis Cluster that `scripts/services.sh` starts (three primaries, a
//! replica each), as is and with the durability setting. Every test uses
//! its own key prefix.

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

mod single_with_replay_cache {
    use std::time::Duration;

    use super::{redis_url, unique_prefix, RedisStore};

    idem_core::store_conformance_tests!(|| async {
        RedisStore::connect(&redis_url())
            .await
            .expect("Redis at IDEM_TEST_REDIS_URL (default redis://127.0.0.1:6379)")
            .with_prefix(&unique_prefix("conformance"))
            .with_replay_cache(1 << 20, Duration::from_secs(60))
    });
}
