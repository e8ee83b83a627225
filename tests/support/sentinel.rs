//! A Redis primary with two replicas and three Sentinels of a test's own,
//! on free ports, for failover tests: the test can kill the primary, hold
//! back what the primary sends its replicas (so that replication lag is a
//! decision, not luck), and wait for the Sentinels to promote a replica.
//! Every process is killed when the value is dropped.
//!
//! The replicas replicate through a [`ReplicationProxy`].

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::{free_port, wait_until};
use crate::replication_proxy::ReplicationProxy;
use crate::server::Server;

/// The service name the Sentinels monitor.
pub const SERVICE: &str = "idem";

/// The topology.
pub struct PrivateSentinels {
    dir: PathBuf,
    /// Data servers by port; the first was the primary at start.
    servers: Vec<(u16, Option<Child>)>,
    sentinels: Vec<(u16, Option<Child>)>,
    /// The proxy the replicas replicate through.
    proxy: ReplicationProxy,
}

/// Sends one inline command to 127.0.0.1:`port`; the raw reply.
pub fn ask(port: u16, command: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                // More only if the server is still writing.
                s.set_read_timeout(Some(Duration::from_millis(30))).ok()?;
            }
        }
    }
    (!out.is_empty()).then(|| String::from_utf8_lossy(&out).into_owned())
}

/// The value of `name` in a reply that lists fields and values (`SENTINEL
/// master`).
fn field(reply: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = reply.lines().collect();
    let at = lines.iter().position(|l| *l == name)?;
    lines.get(at + 2).map(|v| (*v).to_owned())
}

impl PrivateSentinels {
    /// Starts the primary, its two replicas (in sync before this returns)
    /// and three Sentinels (which judge a primary down after 500 ms), on
    /// Redis.
    pub fn start() -> Self {
        Self::start_on(Server::Redis)
    }

    /// The same topology on `server`.
    pub fn start_on(server: Server) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "idem-sentinels-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let primary = free_port();
        let mut topology = Self {
            dir,
            servers: Vec::new(),
            sentinels: Vec::new(),
            proxy: ReplicationProxy::start(primary),
        };
        for i in 0..3 {
            let port = if i == 0 { primary } else { free_port() };
            let mut cmd = Command::new(server.binary());
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&topology.dir);
            if i > 0 {
                cmd.args([
                    "--replicaof",
                    "127.0.0.1",
                    &topology.proxy.port().to_string(),
                ]);
            }
            let child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the server on PATH (scripts/services.sh installs it)");
            topology.servers.push((port, Some(child)));
        }
        for (port, _) in &topology.servers {
            wait_until("redis-server up", Duration::from_secs(10), || {
                ask(*port, "PING").is_some_and(|r| r.starts_with("+PONG"))
            });
        }
        wait_until("two replicas in sync", Duration::from_secs(10), || {
            ask(primary, "INFO replication").is_some_and(|r| {
                r.contains("connected_slaves:2") && r.matches("state=online").count() == 2
            })
        });
        for i in 0..3 {
            let port = free_port();
            let conf = topology.dir.join(format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {SERVICE} 500\n\
                     sentinel failover-timeout {SERVICE} 3000\n\
                     sentinel parallel-syncs {SERVICE} 2\n",
                    dir = topology.dir.display()
                ),
            )
            .expect("sentinel.conf");
            let child = Command::new(server.binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server --sentinel");
            topology.sentinels.push((port, Some(child)));
        }
        for (port, _) in &topology.sentinels {
            wait_until(
                "each Sentinel sees both replicas and the other Sentinels",
                Duration::from_secs(20),
                || {
                    ask(*port, &format!("SENTINEL master {SERVICE}")).is_some_and(|r| {
                        field(&r, "num-slaves").as_deref() == Some("2")
                            && field(&r, "num-other-sentinels").as_deref() == Some("2")
                    })
                },
            );
        }
        topology
    }

    /// The Sentinels' URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|(port, _)| format!("redis://127.0.0.1:{port}"))
            .collect()
    }

    /// The process ids of its data servers and Sentinels that still run
    /// (for a benchmark that pins them to cores of their own).
    pub fn pids(&self) -> Vec<u32> {
        self.servers
            .iter()
            .chain(&self.sentinels)
            .filter_map(|(_, child)| child.as_ref().map(Child::id))
            .collect()
    }

    /// The port of the primary the Sentinels name now.
    pub fn primary(&self) -> Option<u16> {
        let (port, _) = self.sentinels.first()?;
        let reply = ask(
            *port,
            &format!("SENTINEL get-master-addr-by-name {SERVICE}"),
        )?;
        reply.lines().nth(4)?.trim().parse().ok()
    }

    /// Kills the primary (`SIGKILL`): no shutdown, nothing more replicated.
    pub fn kill_primary(&mut self) -> u16 {
        let primary = self.primary().expect("a primary");
        for (port, child) in &mut self.servers {
            if *port == primary {
                if let Some(mut c) = child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
        primary
    }

    /// Holds back (or lets through again) what the primary sends its
    /// replicas: held, they acknowledge nothing new, so what the primary
    /// acknowledges meanwhile is on the primary alone.
    pub fn hold_replication(&self, held: bool) {
        self.proxy.hold(held);
        if !held {
            // A write to the primary pushes out what was held.
            if let Some(p) = self.primary() {
                let _ = ask(p, "PING");
            }
        }
    }

    /// Waits until the Sentinels name a primary other than `old` and it
    /// answers as one.
    pub fn wait_for_promotion(&self, old: u16) -> u16 {
        let mut new = 0;
        wait_until(
            "a replica promoted",
            Duration::from_secs(30),
            || match self.primary() {
                Some(p) if p != old => {
                    new = p;
                    ask(p, "ROLE").is_some_and(|r| r.contains("master"))
                }
                _ => false,
            },
        );
        new
    }
}

impl Drop for PrivateSentinels {
    fn drop(&mut self) {
        for (_, child) in self.servers.iter_mut().chain(self.sentinels.iter_mut()) {
            if let Some(mut c) = child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The shared Sentinels `scripts/services.sh` starts (`IDEM_TEST_SENTINELS`,
/// comma-separated; default 127.0.0.1:26401-26403), monitoring
/// `idem-shared`.
pub fn shared_sentinels() -> Vec<String> {
    std::env::var("IDEM_TEST_SENTINELS")
        .unwrap_or_else(|_| {
            "redis://127.0.0.1:26401,redis://127.0.0.1:26402,redis://127.0.0.1:26403".into()
        })
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// A store behind the shared Sentinels, under a prefix of its own, that
/// acts on a change only once a replica has it.
pub async fn sentinel_store() -> idem_redis::RedisStore {
    idem_redis::RedisStore::connect_sentinel(shared_sentinels(), "idem-shared")
        .await
        .expect("the Sentinels on 127.0.0.1:26401-26403 (scripts/services.sh starts them)")
        .with_prefix(&crate::unique_prefix("sentinel"))
        .with_replication(1, Duration::from_millis(500))
}
