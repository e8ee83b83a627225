//! A MariaDB server of a test's own (its own data directory and port), for
//! the stories that restart or kill the server. Killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::{free_port, wait_until};

/// A `mariadbd` on a free port of 127.0.0.1, `root` without a password,
/// database `test`, `innodb_lock_wait_timeout` of one second.
pub struct PrivateMariaDb {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

/// Where Debian puts the server.
fn server_binary() -> PathBuf {
    ["/usr/sbin/mariadbd", "/usr/sbin/mysqld"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("mariadbd"))
}

impl PrivateMariaDb {
    /// Makes a data directory, starts the server and waits until it answers.
    pub fn start() -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "idem-private-mariadb-{}-{port}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mariadb dir");
        let installed = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", dir.join("data").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("mariadb-install-db on PATH (scripts/services.sh installs mariadb-server)");
        assert!(installed.success(), "mariadb-install-db failed");
        let mut private = Self {
            child: None,
            port,
            dir,
        };
        private.restart();
        let created = Command::new("mariadb")
            .args(["-uroot", "-h127.0.0.1", &format!("-P{port}")])
            .args(["-e", "CREATE DATABASE IF NOT EXISTS test"])
            .status()
            .expect("the mariadb client");
        assert!(created.success(), "CREATE DATABASE test");
        private
    }

    /// The server's URL (database `test`).
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }

    /// Kills the server with `SIGKILL`: no shutdown; InnoDB recovers what
    /// was committed when it starts again.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data directory.
    pub fn restart(&mut self) {
        self.kill();
        let data = self.dir.join("data");
        self.child = Some(
            Command::new(server_binary())
                .arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--socket={}", self.dir.join("sock").display()))
                .arg(format!("--pid-file={}", self.dir.join("pid").display()))
                .arg(format!(
                    "--log-error={}",
                    self.dir.join("error.log").display()
                ))
                .arg(format!("--port={}", self.port))
                .args([
                    "--user=root",
                    "--bind-address=127.0.0.1",
                    "--skip-name-resolve",
                    "--innodb-buffer-pool-size=32M",
                    "--innodb-lock-wait-timeout=1",
                    "--max-connections=200",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("mariadbd"),
        );
        let port = self.port;
        wait_until("the private mariadbd up", Duration::from_secs(30), || {
            Command::new("mariadb")
                .args([
                    "-uroot",
                    "-h127.0.0.1",
                    &format!("-P{port}"),
                    "-e",
                    "SELECT 1",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
