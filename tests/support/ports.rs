//! What the tests' own servers need of the machine: a free port on
//! 127.0.0.1, and a way to wait until a server there is up.

use std::time::{Duration, Instant};

/// A port of 127.0.0.1 that nothing listens on now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Polls `ok` until it holds; panics after `limit` naming `what`.
pub(crate) fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} within {limit:?}");
}
