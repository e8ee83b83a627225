//! The brokers the order examples consume from, each on a queue or stream
//! of the test's own: publishing an order, what is still outstanding
//! (unacknowledged or not yet delivered), and the dead letters. Orders are
//! published with the brokers' own tools where they have one
//! (`redis-cli XADD`) and with their standard clients otherwise.

use std::time::Duration;

use idem_queue::async_nats::{self, jetstream};
use idem_queue::lapin;
use idem_queue::lapin::options::{BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use idem_queue::lapin::types::AMQPValue;
use idem_queue::lapin::{BasicProperties, Connection, ConnectionProperties};

/// A dead letter: its payload and the reason given.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// The message as published.
    pub payload: String,
    /// Why it was dead-lettered.
    pub reason: String,
}

/// A broker with a queue or stream of a test's own.
#[allow(async_fn_in_trait)]
pub trait Broker {
    /// The example that consumes it.
    const EXAMPLE: &'static str;
    /// The example's settings that point it at this queue; `redeliver_ms`
    /// is how soon an unacknowledged message of a dead or frozen consumer
    /// is delivered again (where the broker lets a consumer say).
    fn env(&self, redeliver_ms: u64) -> Vec<(&'static str, String)>;
    /// The example's settings that point it at this queue, every other
    /// setting left to idem-queue's defaults.
    fn default_env(&self) -> Vec<(&'static str, String)>;
    /// Publishes `payload`.
    async fn publish(&self, payload: &str);
    /// Messages not yet acknowledged or dead-lettered.
    async fn outstanding(&self) -> u64;
    /// The dead letters so far.
    async fn dead_letters(&self) -> Vec<DeadLetter>;
    /// Restarts the broker, keeping what it persisted (a RabbitMQ
    /// `stop_app`/`start_app`; a private NATS or Redis killed and started
    /// again on the same port and data).
    async fn restart(&mut self);
}

fn suffix(label: &str) -> String {
    crate::unique_prefix(label)
        .trim_end_matches(':')
        .replace([':', '-'], "_")
}

/// How many times the order examples shipped `order`, counted in the
/// machine's Redis under `prefix` (their `PREFIX`).
pub async fn order_shipments(prefix: &str, order: &str) -> u64 {
    let mut redis = crate::redis_connection(&crate::redis_url()).await;
    let count: Option<u64> = redis::cmd("GET")
        .arg(idem_examples::shipments::Shipments::redis_key(
            prefix, order,
        ))
        .query_async(&mut redis)
        .await
        .expect("GET");
    count.unwrap_or(0)
}

/// The AMQP URL of the machine's RabbitMQ.
pub fn amqp_url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// A quorum queue of the test's own on the machine's RabbitMQ.
pub struct RabbitMq {
    queue: String,
    channel: lapin::Channel,
    connection: Connection,
}

impl RabbitMq {
    /// Declares the queue (as the example does).
    pub async fn new() -> Self {
        let connection = Connection::connect(&amqp_url(), ConnectionProperties::default())
            .await
            .expect("RabbitMQ on 127.0.0.1:5672 (scripts/services.sh starts it)");
        let channel = connection.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let queue = suffix("orders");
        idem_queue::rabbitmq::declare_quorum_queue(&channel, &queue)
            .await
            .expect("queue");
        Self {
            queue,
            channel,
            connection,
        }
    }

    fn count(queue: &str) -> u64 {
        // RabbitMQ's own tool: ready and unacknowledged messages.
        let out = std::process::Command::new("rabbitmqctl")
            .args([
                "list_queues",
                "-q",
                "--no-table-headers",
                "name",
                "messages",
            ])
            .output()
            .expect("rabbitmqctl");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| {
                let mut parts = l.split_whitespace();
                (parts.next() == Some(queue)).then(|| parts.next()?.parse().ok())?
            })
            .unwrap_or(0)
    }
}

impl Broker for RabbitMq {
    const EXAMPLE: &'static str = "orders_rabbitmq";

    fn env(&self, _redeliver_ms: u64) -> Vec<(&'static str, String)> {
        // A frozen consumer's connection is closed (and its messages
        // requeued) after two missed heartbeats of a second.
        vec![
            ("AMQP_URL", format!("{}?heartbeat=1", amqp_url())),
            ("QUEUE", self.queue.clone()),
        ]
    }

    fn default_env(&self) -> Vec<(&'static str, String)> {
        vec![("AMQP_URL", amqp_url()), ("QUEUE", self.queue.clone())]
    }

    async fn publish(&self, payload: &str) {
        let confirm = self
            .channel
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions::default(),
                payload.as_bytes(),
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
        assert!(confirm.is_ack(), "RabbitMQ took the order");
    }

    async fn outstanding(&self) -> u64 {
        Self::count(&self.queue)
    }

    async fn dead_letters(&self) -> Vec<DeadLetter> {
        let dead = format!("{}.dead", self.queue);
        let mut letters = Vec::new();
        // Read without acknowledging, then requeued when the channel closes.
        let channel = self.connection.create_channel().await.expect("channel");
        while let Ok(Some(got)) = channel
            .basic_get(dead.as_str().into(), BasicGetOptions::default())
            .await
        {
            let reason = got
                .delivery
                .properties
                .headers()
                .as_ref()
                .and_then(|h| h.inner().get("idem-reason").cloned())
                .and_then(|v| match v {
                    AMQPValue::LongString(s) => {
                        Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
                    }
                    _ => None,
                })
                .unwrap_or_default();
            letters.push(DeadLetter {
                payload: String::from_utf8_lossy(&got.delivery.data).into_owned(),
                reason,
            });
        }
        let _ = channel.close(200, "read".into()).await;
        letters
    }

    async fn restart(&mut self) {
        // The machine's RabbitMQ, with RabbitMQ's own tool: the tests that
        // use it run one at a time (.config/nextest.toml).
        for step in ["stop_app", "start_app"] {
            let done = std::process::Command::new("rabbitmqctl")
                .arg(step)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("rabbitmqctl");
            assert!(done.success(), "rabbitmqctl {step}");
        }
        let mut again = None;
        for _ in 0..100 {
            if let Ok(c) = Connection::connect(&amqp_url(), ConnectionProperties::default()).await {
                again = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.connection = again.expect("RabbitMQ back after start_app");
        self.channel = self.connection.create_channel().await.expect("channel");
        self.channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
    }
}

/// A JetStream stream of the test's own on the machine's NATS, or on a
/// NATS server of its own.
pub struct JetStream {
    stream: String,
    js: jetstream::Context,
    port: u16,
    private: Option<(std::process::Child, std::path::PathBuf)>,
}

impl JetStream {
    /// On the machine's NATS; the example creates the stream.
    pub async fn new() -> Self {
        Self::on(4222, None).await
    }

    /// On a NATS server with JetStream of its own (free port, own storage).
    pub async fn private() -> Self {
        let port = crate::ports::free_port();
        let dir = std::env::temp_dir().join(format!("idem-nats-{}-{port}", std::process::id()));
        let child = start_nats(port, &dir);
        Self::on(port, Some((child, dir))).await
    }

    async fn on(port: u16, private: Option<(std::process::Child, std::path::PathBuf)>) -> Self {
        let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
            .await
            .expect("NATS with JetStream (scripts/services.sh starts it)");
        Self {
            stream: suffix("ORDERS").to_uppercase(),
            js: jetstream::new(client),
            port,
            private,
        }
    }
}

fn start_nats(port: u16, dir: &std::path::Path) -> std::process::Child {
    let child = std::process::Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("nats-server on PATH (scripts/services.sh installs it)");
    crate::ports::wait_until(
        "the private nats-server up",
        Duration::from_secs(10),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    child
}

impl Drop for JetStream {
    fn drop(&mut self) {
        if let Some((child, dir)) = &mut self.private {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Broker for JetStream {
    const EXAMPLE: &'static str = "orders_nats";

    fn env(&self, redeliver_ms: u64) -> Vec<(&'static str, String)> {
        let mut env = self.default_env();
        env.push(("ACK_WAIT_MS", redeliver_ms.to_string()));
        env
    }

    fn default_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("NATS_URL", format!("nats://127.0.0.1:{}", self.port)),
            ("STREAM", self.stream.clone()),
        ]
    }

    async fn publish(&self, payload: &str) {
        self.js
            .publish(format!("{}.placed", self.stream), payload.to_owned().into())
            .await
            .expect("publish")
            .await
            .expect("JetStream took the order");
    }

    async fn outstanding(&self) -> u64 {
        let Ok(stream) = self.js.get_stream(&self.stream).await else {
            return 0;
        };
        let Ok(mut consumer) = stream
            .get_consumer::<jetstream::consumer::pull::Config>("shippers")
            .await
        else {
            return 0;
        };
        match consumer.info().await {
            Ok(info) => info.num_pending + u64::try_from(info.num_ack_pending).unwrap_or(0),
            Err(_) => u64::MAX,
        }
    }

    async fn dead_letters(&self) -> Vec<DeadLetter> {
        let Ok(mut dead) = self.js.get_stream(format!("{}_DEAD", self.stream)).await else {
            return Vec::new();
        };
        let last = dead.info().await.map_or(0, |i| i.state.last_sequence);
        let mut letters = Vec::new();
        for seq in 1..=last {
            if let Ok(m) = dead.get_raw_message(seq).await {
                letters.push(DeadLetter {
                    payload: String::from_utf8_lossy(&m.payload).into_owned(),
                    reason: m
                        .headers
                        .get("idem-reason")
                        .map(|v| v.as_str().to_owned())
                        .unwrap_or_default(),
                });
            }
        }
        letters
    }

    async fn restart(&mut self) {
        let Some((child, dir)) = &mut self.private else {
            panic!("only a private NATS is restarted");
        };
        let _ = child.kill();
        let _ = child.wait();
        *child = start_nats(self.port, dir);
    }
}

/// A Redis Stream of the test's own on the machine's Redis, or on a
/// Redis of its own (persistent: every write synced).
pub struct RedisStream {
    stream: String,
    port: u16,
    private: Option<crate::PrivateRedis>,
}

impl RedisStream {
    /// A name on the machine's Redis; the example creates the stream and
    /// its group.
    pub fn new() -> Self {
        Self {
            stream: crate::unique_prefix("orders-stream") + "placed",
            port: 6379,
            private: None,
        }
    }

    /// On a Redis of its own.
    pub fn private() -> Self {
        let server = crate::PrivateRedis::start(true);
        Self {
            port: server.port(),
            private: Some(server),
            ..Self::new()
        }
    }

    /// The payloads of the entries delivered to the group and not
    /// acknowledged.
    pub fn pending_payloads(&self) -> Vec<String> {
        let rows = self.cli(&["XPENDING", &self.stream, "shippers", "-", "+", "100"]);
        let is_id = |l: &&str| {
            let mut parts = l.trim().split('-');
            matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None)
                if !a.is_empty() && a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit()))
        };
        rows.lines()
            .filter(is_id)
            .filter_map(|id| {
                let id = id.trim();
                let entry = self.cli(&["--raw", "XRANGE", &self.stream, id, id]);
                let lines: Vec<&str> = entry.lines().collect();
                let at = lines.iter().position(|l| *l == "payload")?;
                lines.get(at + 1).map(|p| (*p).to_owned())
            })
            .collect()
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Default for RedisStream {
    fn default() -> Self {
        Self::new()
    }
}

impl Broker for RedisStream {
    const EXAMPLE: &'static str = "orders_redis_streams";

    fn env(&self, redeliver_ms: u64) -> Vec<(&'static str, String)> {
        let mut env = self.default_env();
        env.push(("MIN_IDLE_MS", redeliver_ms.to_string()));
        env
    }

    fn default_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("STREAM", self.stream.clone()),
            (
                "STREAM_REDIS_URL",
                format!("redis://127.0.0.1:{}", self.port),
            ),
        ]
    }

    async fn publish(&self, payload: &str) {
        // Redis's own tool.
        let id = self.cli(&["XADD", &self.stream, "*", "payload", payload]);
        assert!(id.contains('-'), "XADD: {id}");
    }

    async fn outstanding(&self) -> u64 {
        // Pending entries, and entries the group has not read yet.
        let pending = self.cli(&["XPENDING", &self.stream, "shippers"]);
        let pending: u64 = pending
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        let groups = self.cli(&["XINFO", "GROUPS", &self.stream]);
        let lines: Vec<&str> = groups.lines().collect();
        let lag = lines
            .iter()
            .position(|l| *l == "lag")
            .and_then(|i| lines.get(i + 1))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        pending + lag
    }

    async fn dead_letters(&self) -> Vec<DeadLetter> {
        let out = self.cli(&[
            "--raw",
            "XRANGE",
            &format!("{}:dead", self.stream),
            "-",
            "+",
        ]);
        let lines: Vec<&str> = out.lines().collect();
        let mut letters = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if *line == "payload" {
                let payload = lines.get(i + 1).copied().unwrap_or_default().to_owned();
                let reason = lines[i..]
                    .iter()
                    .position(|l| *l == "idem-reason")
                    .and_then(|j| lines.get(i + j + 1))
                    .copied()
                    .unwrap_or_default()
                    .to_owned();
                letters.push(DeadLetter { payload, reason });
            }
        }
        letters
    }

    async fn restart(&mut self) {
        self.private
            .as_mut()
            .expect("only a private Redis is restarted")
            .restart();
    }
}

/// How long the stories wait for a state before they fail.
pub const PATIENCE: Duration = Duration::from_secs(40);
