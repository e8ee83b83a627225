//! The application's own commands on the store's connection: behind
//! Sentinel they follow the primary as the store's do.

use idem_core::StoreError;
use redis::FromRedisValue;

use crate::RedisStore;

impl RedisStore {
    /// Runs `cmd`, a command of the application's own (its balances, its
    /// scripts as `EVAL`), on the store's connection, under the store's
    /// timeout: behind Sentinel, on the primary the store follows now (a
    /// failure that may mean a failover makes it ask the Sentinels again,
    /// and this call fails as unavailable: nothing is resent); on a
    /// cluster, on the node of the command's first key.
    ///
    /// For data the operation writes with its record, use a
    /// [`transaction`](Self::transaction) instead: it commits only while
    /// the claim holds.
    pub async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        let mut connection = self.connection.clone();
        let answer = match tokio::time::timeout(self.timeout, connection.query(cmd)).await {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => return Err(StoreError::unavailable("redis query failed", e)),
            Err(elapsed) => {
                self.connection.suspect();
                return Err(StoreError::unavailable(
                    format!("redis query did not answer within {:?}", self.timeout),
                    elapsed,
                ));
            }
        };
        T::from_redis_value(answer).map_err(|e| {
            StoreError::corrupt(format!("redis query: an answer of another type: {e}"))
        })
    }
}
