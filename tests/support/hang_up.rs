//! A client that sends a request and hangs up mid-way, with a reset or a
//! close.

use std::time::Duration;

/// How a client hangs up.
#[derive(Clone, Copy, Debug)]
pub enum HangUp {
    /// `RST`: the socket closed with a zero linger.
    Reset,
    /// `FIN`: the socket closed normally.
    Close,
}

/// The raw HTTP/1.1 request of a debit of 1 (`{"amount":1}`, JSON) for
/// `key` to `path` on `addr` (`host:port`); with `close`, it asks the server
/// to close the connection after answering.
pub fn debit_request(addr: &str, path: &str, key: &str, close: bool) -> String {
    let body = r#"{"amount":1}"#;
    let connection = if close { "connection: close\r\n" } else { "" };
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nidempotency-key: {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n{connection}\r\n{body}",
        body.len()
    )
}

/// Sends a debit of 1 ([`debit_request`]) for `key` to `path` on a raw
/// socket to `addr` (`host:port`) and hangs up `after` it was written.
pub async fn send_and_hang_up(addr: &str, path: &str, key: &str, after: Duration, how: HangUp) {
    use tokio::io::AsyncWriteExt as _;
    let request = debit_request(addr, path, key, false);
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
