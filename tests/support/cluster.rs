//! A Redis Cluster of a test's own: three primaries, a replica each, on
//! free ports, for shard failover tests. Each primary announces the port of
//! a [`ReplicationProxy`] in front of it, so that clients and its replica
//! reach it through the proxy, and the test can hold back its replication
//! stream, kill it, and wait for the cluster to promote its replica. Every
//! process is killed when the value is dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::wait_until;
use crate::replication_proxy::ReplicationProxy;
use crate::sentinel::ask;
use crate::Server;

/// One primary: its own port, its proxy, its process.
struct Primary {
    port: u16,
    proxy: ReplicationProxy,
    child: Option<Child>,
}

/// The cluster.
pub struct PrivateCluster {
    dir: PathBuf,
    server: Server,
    primaries: Vec<Primary>,
    /// The replicas, with their ports.
    replicas: Vec<(u16, Child)>,
}

/// A free port whose cluster bus port (the port + 10000) is free too.
fn free_port() -> u16 {
    loop {
        let port = crate::ports::free_port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

fn node(dir: &std::path::Path, port: u16, server: Server) -> Child {
    let data = dir.join(port.to_string());
    std::fs::create_dir_all(&data).expect("node dir");
    Command::new(server.binary())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
        .arg("--cluster-config-file")
        .arg(data.join("nodes.conf"))
        .arg("--dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{} on PATH: {e}", server.binary()))
}

impl PrivateCluster {
    /// Starts the six nodes on Redis, makes the cluster, and moves each
    /// primary behind its proxy (clients and replicas then connect through
    /// it).
    pub fn start() -> Self {
        Self::start_on(Server::Redis)
    }

    /// The same cluster on `server`.
    pub fn start_on(server: Server) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "idem-cluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
        let mut children: Vec<Child> = ports.iter().map(|p| node(&dir, *p, server)).collect();
        for port in &ports {
            wait_until("redis cluster node up", Duration::from_secs(10), || {
                ask(*port, "PING").is_some_and(|r| r.starts_with("+PONG"))
            });
        }
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(ports.iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli");
        assert!(created.success(), "redis-cli --cluster create");
        let replicas: Vec<(u16, Child)> = ports[3..]
            .iter()
            .copied()
            .zip(children.split_off(3))
            .collect();
        let primaries: Vec<Primary> = ports[..3]
            .iter()
            .zip(children)
            .map(|(port, child)| Primary {
                port: *port,
                proxy: ReplicationProxy::start(*port),
                child: Some(child),
            })
            .collect();
        for p in &primaries {
            ask(
                p.port,
                &format!("CONFIG SET cluster-announce-bus-port {}", p.port + 10_000),
            );
            ask(
                p.port,
                &format!("CONFIG SET cluster-announce-port {}", p.proxy.port()),
            );
        }
        let cluster = Self {
            dir,
            server,
            primaries,
            replicas,
        };
        // The replicas follow their primaries' new addresses: through the
        // proxies. Each primary then has its replica online again.
        for p in &cluster.primaries {
            let proxy = p.proxy.port();
            wait_until(
                "each replica replicating through its primary's proxy",
                Duration::from_secs(30),
                || {
                    cluster.replica_ports().iter().any(|r| {
                        ask(*r, "INFO replication").is_some_and(|i| {
                            i.contains(&format!("master_port:{proxy}"))
                                && i.contains("master_link_status:up")
                        })
                    })
                },
            );
        }
        wait_until("cluster_state:ok", Duration::from_secs(20), || {
            cluster
                .node_urls()
                .first()
                .and_then(|_| ask(cluster.primaries[0].proxy.port(), "CLUSTER INFO"))
                .is_some_and(|i| i.contains("cluster_state:ok"))
        });
        cluster
    }

    fn replica_ports(&self) -> Vec<u16> {
        self.replicas.iter().map(|(port, _)| *port).collect()
    }

    /// URLs to reach the cluster (the primaries' proxies).
    pub fn node_urls(&self) -> Vec<String> {
        self.primaries
            .iter()
            .map(|p| format!("redis://127.0.0.1:{}", p.proxy.port()))
            .collect()
    }

    /// The own port of primary `i` (0 to 2), to look at it past the proxy.
    pub fn primary_port(&self, i: usize) -> u16 {
        self.primaries[i].port
    }

    /// Holds back (or lets through) what every primary sends its replica.
    pub fn hold_replication(&self, held: bool) {
        for p in &self.primaries {
            p.proxy.hold(held);
        }
    }

    /// Starts killed primary `i` again, on its own port with its cluster
    /// config: it rejoins as a replica of the primary that replaced it, so
    /// its shard has a replica again. Waits until it replicates.
    pub fn restart_as_replica(&mut self, i: usize) {
        let port = self.primaries[i].port;
        self.primaries[i].child = Some(node(&self.dir, port, self.server));
        wait_until(
            "the old primary replicating its successor",
            Duration::from_secs(30),
            || {
                ask(port, "INFO replication").is_some_and(|r| {
                    r.contains("role:slave") && r.contains("master_link_status:up")
                })
            },
        );
    }

    /// The port of the replica of primary `i`.
    fn replica_of(&self, i: usize) -> Option<u16> {
        let proxy = self.primaries[i].proxy.port();
        self.replica_ports().into_iter().find(|r| {
            ask(*r, "INFO replication")
                .is_some_and(|info| info.contains(&format!("master_port:{proxy}\r")))
        })
    }

    /// Waits until the cluster has promoted `replica` (the replica of the
    /// killed primary, from `replica_of` before the
    /// kill) and is whole again.
    pub fn wait_for_promotion(&self, replica: u16) {
        wait_until(
            "the killed primary's replica promoted",
            Duration::from_secs(30),
            || {
                ask(replica, "INFO replication").is_some_and(|r| r.contains("role:master"))
                    && ask(replica, "CLUSTER INFO").is_some_and(|i| i.contains("cluster_state:ok"))
            },
        );
    }

    /// Kills primary `i` (`SIGKILL`) and returns the port of its replica,
    /// for [`wait_for_promotion`](Self::wait_for_promotion).
    pub fn kill_primary(&mut self, i: usize) -> u16 {
        let replica = self.replica_of(i).expect("primary's replica");
        if let Some(mut c) = self.primaries[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        replica
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        for p in &mut self.primaries {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for (_, c) in &mut self.replicas {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
