//! A consumer process of a test's own: one of the order examples
//! (`orders_rabbitmq`, `orders_nats`, `orders_redis_streams`) started with
//! the test's settings, its stdout lines collected, and signals to kill,
//! freeze and resume it. Killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::ports::wait_until;

/// A running example.
pub struct Worker {
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    name: String,
}

/// The path of the example `name`, built by `cargo build --examples`.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let bin = profile_dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: build the examples first (`cargo build --examples`)",
        bin.display()
    );
    bin
}

impl Worker {
    /// Starts example `name` with `env`, and waits until it prints that it
    /// is consuming.
    pub fn start(name: &str, env: &[(&str, String)]) -> Self {
        let mut cmd = Command::new(example_binary(name));
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("the example starts");
        let stdout = child.stdout.take().expect("its stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                into.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        let worker = Self {
            child: Some(child),
            lines,
            name: name.to_owned(),
        };
        worker.wait_for("consuming", Duration::from_secs(30));
        worker
    }

    /// How many lines it printed that start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// Waits until it printed a line that starts with `prefix`.
    pub fn wait_for(&self, prefix: &str, limit: Duration) {
        wait_until(&format!("{} printed `{prefix}`", self.name), limit, || {
            self.count(prefix) > 0
        });
    }

    /// Waits until it printed a line that starts with one of `prefixes`,
    /// or exited.
    pub fn wait_for_any_or_exit(&mut self, prefixes: &[&str], limit: Duration) {
        let name = self.name.clone();
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            if exited || prefixes.iter().any(|p| self.count(p) > 0) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{name} neither printed any of {prefixes:?} nor exited within {limit:?}");
    }

    /// Sends `signal`; false if the process is gone.
    fn signal(&mut self, signal: &str) -> bool {
        let Some(child) = &mut self.child else {
            return false;
        };
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        Command::new("kill")
            .args([signal, &child.id().to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `SIGKILL`: no shutdown, no ack, nothing flushed.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `SIGSTOP`: frozen, its connections open, no lease renewed.
    pub fn freeze(&mut self) {
        assert!(
            self.signal("-STOP"),
            "{} is running to be frozen",
            self.name
        );
    }

    /// `SIGTERM`, as an orchestrator stops a process: it should stop
    /// taking work, finish what runs, and exit.
    pub fn terminate(&mut self) {
        assert!(
            self.signal("-TERM"),
            "{} is running to be terminated",
            self.name
        );
    }

    /// Waits for the process to exit by itself, at most `limit`; its exit
    /// status, or `None` if it was still running (then it is killed).
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `SIGCONT` (nothing if it is gone).
    pub fn resume(&mut self) {
        self.signal("-CONT");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}
