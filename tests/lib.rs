//! Cross-crate tests of idem; the tests live in `tests/*.rs` of this package.
//! This library holds what they share: serving a router on a real socket,
//! a store that is down, and one that is slow to claim.

use std::time::Duration;

pub mod cluster;
mod pgbouncer;
pub mod replication_proxy;
pub mod sentinel;

pub use pgbouncer::{
    pgbouncer_store, pgbouncer_url, pool_through, store_through, PrivatePgBouncer,
};

use idem_core::{
    async_trait, Begin, Fingerprint, Lease, Outcome, RecordId, RecordInfo, Removal, Store,
    StoreError,
};

/// Serves `router` on 127.0.0.1 at a free port; returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("server");
    });
    format!("http://{addr}")
}

/// Serves the actix-web app that `app` makes (once per worker) on
/// 127.0.0.1 at a free port, on a thread of its own with its own actix
/// system, until the test process ends; returns its base URL.
pub fn serve_actix<F, T>(app: F) -> String
where
    F: Fn() -> actix_web::App<T> + Send + Clone + 'static,
    T: actix_web::dev::ServiceFactory<
            actix_web::dev::ServiceRequest,
            Config = (),
            Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            actix_web::HttpServer::new(app)
                .workers(2)
                .disable_signals()
                .listen(listener)
                .expect("listen")
                .run()
                .await
                .expect("server");
        });
    });
    format!("http://{addr}")
}

/// How a client hangs up.
#[derive(Clone, Copy, Debug)]
pub enum HangUp {
    /// `RST`: the socket closed with a zero linger.
    Reset,
    /// `FIN`: the socket closed normally.
    Close,
}

/// Sends a debit of 1 (`{"amount":1}`, JSON) for `key` to `path` on a raw
/// socket to `addr` (`host:port`) and hangs up `after` it was written.
pub async fn send_and_hang_up(addr: &str, path: &str, key: &str, after: Duration, how: HangUp) {
    use tokio::io::AsyncWriteExt as _;
    let body = r#"{"amount":1}"#;
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nidempotency-key: {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    tokio::time::sleep(after).await;
    if let HangUp::Reset = how {
        socket.set_zero_linger().expect("SO_LINGER 0");
    }
    drop(socket);
}

/// A store whose backend cannot be reached: every call fails as a real
/// client's would on a refused connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct DownStore;

fn refused(what: &str) -> StoreError {
    StoreError::unavailable(
        format!("{what}: cannot reach the store"),
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
    )
}

#[async_trait]
impl Store for DownStore {
    async fn begin(&self, _: &RecordId, _: &Fingerprint, _: Duration) -> Result<Begin, StoreError> {
        Err(refused("begin"))
    }
    async fn complete(
        &self,
        _: &RecordId,
        _: &Lease,
        _: &Outcome,
        _: Duration,
    ) -> Result<(), StoreError> {
        Err(refused("complete"))
    }
    async fn release(&self, _: &RecordId, _: &Lease) -> Result<(), StoreError> {
        Err(refused("release"))
    }
    async fn renew(&self, _: &RecordId, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
        Err(refused("renew"))
    }
}

/// A store that counts its begins and can answer each of them late (a store
/// across a slow network, or under load, so that a client can give up while
/// its claim is being taken); everything else goes straight to `inner`.
pub struct SlowBegin<S> {
    inner: S,
    by: Duration,
    begins: std::sync::atomic::AtomicUsize,
}

impl<S> SlowBegin<S> {
    /// Begins answer `by` late (`Duration::ZERO`: only counted).
    pub fn new(inner: S, by: Duration) -> Self {
        Self {
            inner,
            by,
            begins: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// How many begins were asked.
    pub fn begins(&self) -> usize {
        self.begins.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait]
impl<S: Store> Store for SlowBegin<S> {
    async fn begin(
        &self,
        id: &RecordId,
        fp: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        self.begins
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let begun = self.inner.begin(id, fp, lease).await;
        if !self.by.is_zero() {
            tokio::time::sleep(self.by).await;
        }
        begun
    }
    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.inner.complete(id, lease, outcome, ttl).await
    }
    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(id, lease).await
    }
    async fn renew(&self, id: &RecordId, lease: &Lease, by: Duration) -> Result<Lease, StoreError> {
        self.inner.renew(id, lease, by).await
    }
    fn wakes(&self) -> bool {
        self.inner.wakes()
    }
    async fn changed(&self, id: &RecordId, within: Duration) -> Option<RecordInfo> {
        self.inner.changed(id, within).await
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        self.inner.inspect(id).await
    }
    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        self.inner.remove(id, force).await
    }
}

/// The Redis server the tests use (`IDEM_TEST_REDIS_URL`, default the local one).
pub fn redis_url() -> String {
    std::env::var("IDEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
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

/// A key prefix no other test, process or run uses.
pub fn unique_prefix(label: &str) -> String {
    format!("idem-test:{label}:{}:", unique_suffix())
}

/// `<unix secs>_<nanos>_<pid>_<counter>`: unique across tests, processes
/// and runs, and starting with the time (stale schemas are found by it).
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}_{}_{}_{}",
        now.as_secs(),
        now.subsec_nanos(),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `redis-server` of a test's own, on a free port, killed when dropped.
/// With `persistent`, it keeps an append-only file synced on every write,
/// so that a restart after `SIGKILL` finds every acknowledged record.
pub struct PrivateRedis {
    child: Option<std::process::Child>,
    port: u16,
    dir: std::path::PathBuf,
    persistent: bool,
}

impl PrivateRedis {
    /// Starts a server and waits until it answers.
    pub fn start(persistent: bool) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir =
            std::env::temp_dir().join(format!("idem-private-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("redis dir");
        let mut server = Self {
            child: None,
            port,
            dir,
            persistent,
        };
        server.restart();
        server
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
        let mut cmd = std::process::Command::new("redis-server");
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
                .expect("redis-server on PATH (scripts/services.sh installs it)"),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let mut buf = [0u8; 64];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read(&mut buf)
                        .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
                {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("private redis-server on port {} did not start", self.port);
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The PostgreSQL database the tests use (`IDEM_TEST_DATABASE_URL`, default
/// the local `test` database as `postgres`).
pub fn database_url() -> String {
    std::env::var("IDEM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test?sslmode=disable".into())
}

/// A schema name no other test, process or run uses: `idem_t_<unix secs>_<pid>_<n>`.
pub fn unique_schema() -> String {
    format!("idem_t_{}", unique_suffix())
}

/// A pool on the test database.
pub async fn pg_pool(max_connections: u32) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&database_url())
        .await
        .expect("PostgreSQL at IDEM_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test)")
}

/// A store whose renewals never get through, for a holder that stalls: a
/// frozen process, a partition from the store. Its lease ends while it
/// works, and another attempt can take the record over; everything else
/// goes to `inner`.
pub struct RenewalsFail(pub std::sync::Arc<dyn Store>);

#[async_trait]
impl Store for RenewalsFail {
    async fn begin(
        &self,
        id: &RecordId,
        fp: &Fingerprint,
        lease: Duration,
    ) -> Result<Begin, StoreError> {
        self.0.begin(id, fp, lease).await
    }
    async fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.0.complete(id, lease, outcome, ttl).await
    }
    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        self.0.release(id, lease).await
    }
    async fn renew(&self, _: &RecordId, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
        Err(refused("renewal (the holder is stalled)"))
    }
    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        self.0.remove(id, force).await
    }
}

/// A migrated `PgStore` in a schema of its own. Test schemas older than an
/// hour (left by earlier runs) are dropped on the way.
pub async fn pg_store() -> idem_postgres::PgStore {
    let pool = pg_pool(8).await;
    drop_stale_schemas(&pool).await;
    let store = idem_postgres::PgStore::new(pool)
        .with_schema(&unique_schema())
        .expect("valid schema name");
    store.migrate().await.expect("migration");
    store
}

pub(crate) async fn drop_stale_schemas(pool: &sqlx::PgPool) {
    let cutoff = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(3600);
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    for name in names {
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s < cutoff)
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS \"{name}\" CASCADE"
            )))
            .execute(pool)
            .await;
        }
    }
}

/// A TCP proxy in front of PostgreSQL that counts the statements clients
/// execute: each `Execute` (extended protocol) and `Query` (simple protocol)
/// message. Statements are counted on the wire, not by the code under test.
pub struct PgStatementCounter {
    /// Where clients connect instead of the server.
    pub addr: std::net::SocketAddr,
    executed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl PgStatementCounter {
    /// Starts a proxy to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let executed = std::sync::Arc::new(AtomicU64::new(0));
        let counter = std::sync::Arc::clone(&executed);
        let upstream = upstream.to_owned();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let counter = std::sync::Arc::clone(&counter);
                tokio::spawn(async move {
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let to_client = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    });
                    // The startup message has no type byte: length, then body.
                    let mut len = [0u8; 4];
                    if client_read.read_exact(&mut len).await.is_ok() {
                        let mut body =
                            vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                        if client_read.read_exact(&mut body).await.is_ok()
                            && server_write.write_all(&len).await.is_ok()
                            && server_write.write_all(&body).await.is_ok()
                        {
                            // Then typed messages: type, length, body.
                            let mut head = [0u8; 5];
                            while client_read.read_exact(&mut head).await.is_ok() {
                                if head[0] == b'E' || head[0] == b'Q' {
                                    counter.fetch_add(1, Ordering::SeqCst);
                                }
                                let n = (u32::from_be_bytes([head[1], head[2], head[3], head[4]])
                                    as usize)
                                    .saturating_sub(4);
                                let mut body = vec![0u8; n];
                                if client_read.read_exact(&mut body).await.is_err()
                                    || server_write.write_all(&head).await.is_err()
                                    || server_write.write_all(&body).await.is_err()
                                {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = server_write.shutdown().await;
                    to_client.abort();
                });
            }
        });
        Self { addr, executed }
    }

    /// Statements executed through the proxy so far.
    pub fn executed(&self) -> u64 {
        self.executed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A call of operation `op` under `key` in `scope`, fingerprinting the key.
pub fn call(scope: &str, key: &str) -> idem_core::Call {
    idem_core::Call::new(
        scope,
        idem_core::IdempotencyKey::parse(key).expect("a valid key"),
        idem_core::Fingerprint::of("op", &key).expect("fingerprint"),
    )
}

/// Claims `call`'s record directly on `store`, as a holder outside the engine
/// would; panics if the record is not free.
pub async fn claim(store: &dyn Store, call: &idem_core::Call, lease: Duration) -> Lease {
    match store
        .begin(call.record_id(), call.fingerprint(), lease)
        .await
    {
        Ok(Begin::Acquired(lease)) => lease,
        other => panic!(
            "the record of {:?} must be free to claim, got {other:?}",
            call.key()
        ),
    }
}
