//! PgBouncer for the tests: the shared one `scripts/services.sh` starts
//! (transaction pooling, on 127.0.0.1:6432), and one of a test's own that it
//! can restart.

use std::time::Duration;

use crate::{database_url, drop_stale_schemas, pg_pool, unique_schema};

/// The shared PgBouncer's URL for the test database
/// (`IDEM_TEST_PGBOUNCER_URL`, default 127.0.0.1:6432).
pub fn pgbouncer_url() -> String {
    std::env::var("IDEM_TEST_PGBOUNCER_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:6432/test?sslmode=disable".into())
}

/// A pool through the PgBouncer at `url`.
pub async fn pool_through(url: &str, max_connections: u32) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
        .expect("PgBouncer (scripts/services.sh starts it on 127.0.0.1:6432)")
}

/// A store in a schema of its own whose pool goes through the PgBouncer at
/// `url`, set up for it: unnamed statements, and the woken wait's `LISTEN`
/// on a direct connection to the database.
pub async fn store_through(url: &str) -> idem_postgres::PgStore {
    // A direct connection drops the schemas stale runs left.
    drop_stale_schemas(&pg_pool(1).await).await;
    let direct: sqlx::postgres::PgConnectOptions =
        database_url().parse().expect("IDEM_TEST_DATABASE_URL");
    let store = idem_postgres::PgStore::new(pool_through(url, 8).await)
        .with_schema(&unique_schema())
        .expect("valid schema name")
        .behind_transaction_pooler()
        .listen_with(direct);
    store.migrate().await.expect("migration through PgBouncer");
    store
}

/// A store through the shared PgBouncer (see [`store_through`]).
pub async fn pgbouncer_store() -> idem_postgres::PgStore {
    store_through(&pgbouncer_url()).await
}

/// A `pgbouncer` of a test's own in transaction mode, in front of the test
/// database, on a free port; stopped when dropped.
pub struct PrivatePgBouncer {
    child: Option<std::process::Child>,
    port: u16,
    dir: std::path::PathBuf,
}

impl PrivatePgBouncer {
    /// Starts it and waits until it accepts connections.
    pub fn start() -> Self {
        Self::start_with("ignore_startup_parameters = extra_float_digits,options\n")
    }

    /// Started with a stock `pgbouncer.ini`: it refuses the startup
    /// parameters it does not know (sqlx's `extra_float_digits`).
    pub fn start_stock() -> Self {
        Self::start_with("")
    }

    fn start_with(extra: &str) -> Self {
        let port = crate::ports::free_port();
        let dir =
            std::env::temp_dir().join(format!("idem-pgbouncer-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("pgbouncer dir");
        let ini = format!(
            "[databases]\n\
             test = host=127.0.0.1 port=5432 dbname=test user=postgres\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {users}\n\
             pool_mode = transaction\n\
             max_client_conn = 200\n\
             default_pool_size = 10\n\
             {extra}",
            users = dir.join("users.txt").display()
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini).expect("pgbouncer.ini");
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").expect("users.txt");
        let mut bouncer = Self {
            child: None,
            port,
            dir,
        };
        bouncer.restart();
        bouncer
    }

    /// Its URL for the test database.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/test?sslmode=disable",
            self.port
        )
    }

    /// Stops it at once (`SIGKILL`): every client connection drops, and a
    /// transaction in progress through it is rolled back by the server.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        // PgBouncer refuses to run as root; `-u` drops to `postgres`.
        let mut cmd = std::process::Command::new("pgbouncer");
        if is_root() {
            cmd.args(["-u", "postgres"]);
            let _ = std::process::Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&self.dir)
                .status();
        }
        self.child = Some(
            cmd.arg(self.dir.join("pgbouncer.ini"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("pgbouncer on PATH (scripts/services.sh installs it)"),
        );
        let port = self.port;
        crate::ports::wait_until("the private pgbouncer up", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
    }
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

impl Drop for PrivatePgBouncer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
