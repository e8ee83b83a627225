//! A TCP proxy that breaks connections on purpose, for the caller's half:
//! each connection it accepts gets the next fault of a repeating plan. It
//! lets the request through and drops the answer (the request ran; the
//! client never hears), resets the connection before the request reaches
//! the server, refuses the connection outright, or passes it through after
//! a delay. Clients under test should open one connection per attempt
//! (no pooling), so that a fault falls on an attempt.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Passes it through.
    Pass,
    /// Passes the request through, waits for the server's answer, and
    /// closes the client's side without it: the request ran. On HTTP/2
    /// (prior knowledge, as gRPC clients speak it) the connection's own
    /// frames pass both ways, and the first header block the server sends
    /// on a stream is where it closes.
    DropAnswer,
    /// Closes both sides before anything reaches the server.
    Reset,
    /// Closes the client's side at once: refused.
    Refuse,
    /// Passes it through after this delay.
    Delay(Duration),
}

/// A running proxy; it lives as long as the test process.
#[derive(Clone)]
pub struct FaultProxy {
    addr: std::net::SocketAddr,
    counts: Arc<Mutex<Vec<(Fault, usize)>>>,
}

impl FaultProxy {
    /// A proxy on a free port in front of `target` (`127.0.0.1:port`),
    /// giving connection n the fault `plan[n % plan.len()]`.
    pub async fn start(target: std::net::SocketAddr, plan: Vec<Fault>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let counts = Arc::new(Mutex::new(plan.iter().map(|f| (*f, 0)).collect::<Vec<_>>()));
        let next = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&counts);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let n = next.fetch_add(1, Ordering::SeqCst) % plan.len();
                seen.lock().unwrap_or_else(PoisonError::into_inner)[n].1 += 1;
                tokio::spawn(handle(client, target, plan[n]));
            }
        });
        Self { addr, counts }
    }

    /// The proxy's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections got each fault.
    pub fn counts(&self) -> Vec<(Fault, usize)> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn handle(mut client: TcpStream, target: std::net::SocketAddr, fault: Fault) {
    match fault {
        Fault::Refuse => drop(client),
        Fault::Reset => {
            // Read a little of the request, then close without sending it.
            let mut buf = [0u8; 16];
            let _ = client.read(&mut buf).await;
            drop(client);
        }
        Fault::Pass => pass(client, target).await,
        Fault::Delay(delay) => {
            tokio::time::sleep(delay).await;
            pass(client, target).await;
        }
        Fault::DropAnswer => {
            let Ok(mut server) = TcpStream::connect(target).await else {
                return;
            };
            // The request: read until the client has sent a whole one (an
            // HTTP/1.1 request is short here: its head and a small body,
            // sent at once), or until it is HTTP/2's preface.
            let mut buf = vec![0u8; 64 * 1024];
            let mut request = Vec::new();
            loop {
                if request.starts_with(H2_PREFACE) {
                    return drop_h2_answer(client, server, request).await;
                }
                let preface_so_far = H2_PREFACE.starts_with(&request);
                if !preface_so_far && is_whole_request(&request) {
                    break;
                }
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            if server.write_all(&request).await.is_err() {
                return;
            }
            // Wait for the answer to start, then close on the client.
            let _ = server.read(&mut buf).await;
            drop(client);
        }
    }
}

/// What an HTTP/2 client sends first (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// HTTP/2's frame type of a header block (RFC 9113, section 6.2).
const HEADERS: u8 = 0x1;

/// [`Fault::DropAnswer`] on an HTTP/2 connection: everything the client
/// sends goes through, and the server's frames too (its settings, window
/// updates, pings) until the first header block on a stream, the answer to
/// a request that ran; then both connections close, that frame unsent.
async fn drop_h2_answer(client: TcpStream, server: TcpStream, sent: Vec<u8>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    if sw.write_all(&sent).await.is_err() {
        return;
    }
    let up = async {
        let _ = tokio::io::copy(&mut cr, &mut sw).await;
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            // Whole frames: a 9-byte head (length, type, flags, stream),
            // then the payload.
            while pending.len() >= 9 {
                let length = usize::from(pending[0]) << 16
                    | usize::from(pending[1]) << 8
                    | usize::from(pending[2]);
                if pending.len() < 9 + length {
                    break;
                }
                let stream = u32::from_be_bytes([pending[5], pending[6], pending[7], pending[8]])
                    & 0x7fff_ffff;
                if pending[3] == HEADERS && stream != 0 {
                    return;
                }
                if cw.write_all(&pending[..9 + length]).await.is_err() {
                    return;
                }
                pending.drain(..9 + length);
            }
            match sr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
        }
    };
    // The answer's frame seen (or either side gone): both connections close
    // as this returns.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

async fn pass(client: TcpStream, target: std::net::SocketAddr) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async {
        let _ = tokio::io::copy(&mut cr, &mut sw).await;
        let _ = sw.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Whether `bytes` hold a whole HTTP/1.1 request with a `Content-Length`
/// body (or none).
fn is_whole_request(bytes: &[u8]) -> bool {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    bytes.len() >= end + 4 + length
}
