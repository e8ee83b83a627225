//! A TCP proxy in front of a Redis primary that can hold back what the
//! primary sends its replicas, so that replication lag in a failover test
//! is a decision, not luck. Every connection passes through; a connection
//! that asks for the replication stream (`PSYNC` or `SYNC`) is a replication
//! link, and while the proxy is held, what the primary sends on it is kept
//! back, and dropped if the primary closes first, as a network would.
//! (Stopping a replica with `SIGSTOP` would not do: the kernel still takes
//! the stream into its socket, and it applies it once resumed.)

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A running proxy; it lives as long as the test process.
#[derive(Clone)]
pub struct ReplicationProxy {
    port: u16,
    held: Arc<AtomicBool>,
}

impl ReplicationProxy {
    /// A proxy on a free port in front of 127.0.0.1:`primary`.
    pub fn start(primary: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy port");
        let port = listener.local_addr().expect("proxy address").port();
        let held = Arc::new(AtomicBool::new(false));
        let proxy = Self {
            port,
            held: Arc::clone(&held),
        };
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if let Ok(upstream) = TcpStream::connect(("127.0.0.1", primary)) {
                    link(client, upstream, Arc::clone(&held));
                }
            }
        });
        proxy
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Holds back (or lets through again) the replication stream.
    pub fn hold(&self, held: bool) {
        self.held.store(held, Ordering::SeqCst);
    }
}

fn link(client: TcpStream, upstream: TcpStream, held: Arc<AtomicBool>) {
    let (Ok(client_in), Ok(upstream_out)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let replication = Arc::new(AtomicBool::new(false));
    let marked = Arc::clone(&replication);
    // Client to primary: as is, noting a request for the replication stream.
    std::thread::spawn(move || {
        let (mut from, mut to) = (client_in, upstream_out);
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let sent = &buf[..n];
            if sent.windows(4).any(|w| w.eq_ignore_ascii_case(b"SYNC")) {
                marked.store(true, Ordering::SeqCst);
            }
            if to.write_all(sent).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
    // Primary to client: held back on a replication link while held.
    std::thread::spawn(move || {
        let (mut from, mut to) = (upstream, client);
        let mut kept = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            kept.extend_from_slice(&buf[..n]);
            if !(replication.load(Ordering::SeqCst) && held.load(Ordering::SeqCst)) {
                if to.write_all(&kept).is_err() {
                    break;
                }
                kept.clear();
            }
        }
        // The primary is gone: what was held back never arrives.
        let _ = to.shutdown(Shutdown::Both);
    });
}
