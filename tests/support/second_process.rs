//! A second process of the running test binary, for the tests that show one
//! execution across two processes on one store: it runs an ignored test of
//! the same binary, says when it is ready, starts on a word, and prints
//! what it got.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What the second process prints once it is ready.
const READY: &str = "second process ready";

/// The second process, ready to start.
pub struct SecondProcess {
    child: Child,
    out: BufReader<ChildStdout>,
    stdin: ChildStdin,
}

impl SecondProcess {
    /// Runs the ignored test `test` of this binary with `env`, and waits
    /// until it is ready.
    pub fn start(test: &str, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args([
                test,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the second process");
        let mut out = BufReader::new(child.stdout.take().expect("its output"));
        let stdin = child.stdin.take().expect("its input");
        let mut line = String::new();
        while !line.contains(READY) {
            line.clear();
            let read = out.read_line(&mut line).expect("its output");
            assert!(read > 0, "the second process ended before it was ready");
        }
        Self { child, out, stdin }
    }

    /// Tells it to start.
    pub fn go(&mut self) {
        writeln!(self.stdin, "go").expect("the word");
    }

    /// Waits for it to end; the executions and replays it reported.
    pub async fn counts(self) -> (usize, usize) {
        let Self {
            mut child, mut out, ..
        } = self;
        let rest = tokio::task::spawn_blocking(move || {
            let mut rest = String::new();
            let mut line = String::new();
            while out.read_line(&mut line).unwrap_or(0) > 0 {
                rest.push_str(&line);
                line.clear();
            }
            rest
        })
        .await
        .expect("its output");
        assert!(child.wait().expect("the second process").success());
        let counts = rest
            .lines()
            .find_map(|l| l.strip_prefix("executed "))
            .expect("the second process's counts");
        let (executed, replayed) = counts.split_once(" replayed ").expect("both counts");
        (
            executed.parse().expect("a count"),
            replayed.trim().parse().expect("a count"),
        )
    }
}

/// In the second process: says it is ready, and waits for the word.
pub fn ready_then_wait() {
    // On a line of its own: libtest writes the test's name before it.
    println!("\n{READY}");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).expect("the word");
}

/// In the second process: reports what it got.
pub fn report(executed: usize, replayed: usize) {
    println!("executed {executed} replayed {replayed}");
}
