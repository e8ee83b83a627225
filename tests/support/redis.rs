//! The Redis the tests use: the shared server and cluster, and a server of
//! a test's own that it can kill and restart.

use std::time::Duration;

use crate::ports::wait_until;
use crate::sentinel::ask;

/// The Redis server the tests use (`IDEM_TEST_REDIS_URL`, default the local one).
pub fn redis_url() -> String {
    std::env::var("IDEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A plain connection to the Redis at `url`, for a test's own commands
/// (reading what a store wrote, counting commands, killing clients).
pub async fn redis_connection(url: &str) -> ::redis::aio::MultiplexedConnection {
    ::redis::Client::open(url)
        .expect("a valid Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("a connection to the test's Redis")
}

/// `INFO commandstats` as (command, calls), without the `INFO` and
/// `CONFIG` the tests send themselves.
pub async fn redis_command_calls(
    con: &mut ::redis::aio::MultiplexedConnection,
) -> std::collections::BTreeMap<String, u64> {
    redis_command_stats(con)
        .await
        .into_iter()
        .map(|(name, (calls, _))| (name, calls))
        .collect()
}

/// `INFO commandstats` as (command, (calls, microseconds of Redis CPU in
/// all)), without the `INFO` and `CONFIG` the tests send themselves.
pub async fn redis_command_stats(
    con: &mut ::redis::aio::MultiplexedConnection,
) -> std::collections::BTreeMap<String, (u64, u64)> {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .expect("INFO");
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let field = |f: &str| -> Option<u64> {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(f))?
                    .parse()
                    .ok()
            };
            Some((name.to_owned(), (field("calls=")?, field("usec=")?)))
        })
        .filter(|(name, _)| !name.starts_with("info") && !name.starts_with("config"))
        .collect()
}

/// The Redis Cluster nodes the tests use (`IDEM_TEST_REDIS_CLUSTER`, comma
/// separated; default the three nodes `scripts/services.sh` starts).
pub fn redis_cluster_nodes() -> Vec<String> {
    std::env::var("IDEM_TEST_REDIS_CLUSTER")
        .unwrap_or_else(|_| {
            "redis://127.0.0.1:7301,redis://127.0.0.1:7302,redis://127.0.0.1:7303".into()
        })
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// The Valkey 8 Cluster nodes the tests use (`IDEM_TEST_VALKEY_CLUSTER`,
/// comma separated; default the three primaries `scripts/services.sh`
/// starts on 7501-7503).
pub fn valkey_cluster_nodes() -> Vec<String> {
    std::env::var("IDEM_TEST_VALKEY_CLUSTER")
        .unwrap_or_else(|_| {
            "redis://127.0.0.1:7501,redis://127.0.0.1:7502,redis://127.0.0.1:7503".into()
        })
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// The Valkey 8 server the tests use (`IDEM_TEST_VALKEY_URL`, default
/// redis://127.0.0.1:6380, which `scripts/services.sh` starts).
pub fn valkey_url() -> String {
    std::env::var("IDEM_TEST_VALKEY_URL").unwrap_or_else(|_| "redis://127.0.0.1:6380".into())
}

/// A `redis-server` of a test's own, on a free port, killed when dropped.
/// With `persistent`, it keeps an append-only file synced on every write,
/// so that a restart after `SIGKILL` finds every acknowledged record.
pub struct PrivateRedis {
    child: Option<std::process::Child>,
    server: crate::Server,
    port: u16,
    dir: std::path::PathBuf,
    persistent: bool,
}

impl PrivateRedis {
    /// Starts a Redis server and waits until it answers.
    pub fn start(persistent: bool) -> Self {
        Self::start_on(crate::Server::Redis, persistent)
    }

    /// Starts `server` and waits until it answers.
    pub fn start_on(server: crate::Server, persistent: bool) -> Self {
        let port = crate::ports::free_port();
        let dir =
            std::env::temp_dir().join(format!("idem-private-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("redis dir");
        let mut private = Self {
            child: None,
            server,
            port,
            dir,
            persistent,
        };
        private.restart();
        private
    }

    /// The server's process id (0 while it is not running).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server with `SIGKILL`: no shutdown, no final save.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = std::process::Command::new(self.server.binary());
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&self.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        if self.persistent {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        self.child = Some(
            cmd.spawn()
                .expect("the server on PATH (scripts/services.sh installs it)"),
        );
        let port = self.port;
        wait_until(
            "the private redis-server up",
            Duration::from_secs(10),
            || ask(port, "PING").is_some_and(|r| r.starts_with("+PONG")),
        );
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
