//! The gRPC example's answers, framed as the gRPC over HTTP/2 spec says,
//! seen by a client that is not tonic: the `h2` crate directly, through a
//! proxy that keeps every byte the server sent. Every answer, live and
//! replayed, is either a trailers-only response (one HEADERS frame with
//! END_STREAM and `grpc-status`) or HEADERS, DATA and a trailing HEADERS
//! frame with END_STREAM and `grpc-status`; never a stream ended by a DATA
//! frame, which spec-following clients (grpcio, grpc-go, grpc-java) read as
//! a broken response whatever status the headers carried.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request};
use idem_core::{Engine, MemoryStore, Policy};
use idem_examples::grpc_payments::{serve, DebitRequest, Payments};
use idem_examples::payments::MemoryLedger;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The gRPC example on memory; its address.
async fn server() -> String {
    slow_server(Duration::ZERO).await
}

/// The gRPC example on memory, each debit taking `delay`; its address.
async fn slow_server(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let store = MemoryStore::new();
    let payments = Payments {
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: delay,
    };
    let engine = Engine::new(store).with_policy(Policy::default());
    tokio::spawn(serve(listener, engine, payments));
    addr
}

/// A proxy for one connection that keeps the bytes the server sent.
async fn recording_proxy(upstream: String) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.expect("accept");
        let server = TcpStream::connect(upstream).await.expect("connect");
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        });
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            kept.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(&buf[..n]);
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    (addr, seen)
}

/// One HTTP/2 frame's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    kind: u8,
    flags: u8,
    length: usize,
    /// A RST_STREAM frame's error code.
    error: Option<u32>,
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const END_STREAM: u8 = 0x1;

/// The frames the server sent, by stream (stream 0 left out).
fn frames_by_stream(bytes: &[u8]) -> BTreeMap<u32, Vec<Frame>> {
    let mut streams: BTreeMap<u32, Vec<Frame>> = BTreeMap::new();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let length = usize::from(bytes[at]) << 16
            | usize::from(bytes[at + 1]) << 8
            | usize::from(bytes[at + 2]);
        let (kind, flags) = (bytes[at + 3], bytes[at + 4]);
        let stream = u32::from_be_bytes([
            bytes[at + 5] & 0x7f,
            bytes[at + 6],
            bytes[at + 7],
            bytes[at + 8],
        ]);
        let error = (kind == RST_STREAM && at + 13 <= bytes.len()).then(|| {
            u32::from_be_bytes([
                bytes[at + 9],
                bytes[at + 10],
                bytes[at + 11],
                bytes[at + 12],
            ])
        });
        if stream != 0 {
            streams.entry(stream).or_default().push(Frame {
                kind,
                flags,
                length,
                error,
            });
        }
        at += 9 + length;
    }
    streams
}

/// Whether a stream's frames are a valid gRPC response: trailers-only, or
/// headers, data and trailers, ended by the trailers. A server that answered
/// before reading the whole request may then reset the stream with
/// `NO_ERROR` (HTTP/2's way to say "stop sending"), which is allowed.
fn valid_grpc_response(frames: &[Frame]) -> Result<(), String> {
    let ends = |f: &Frame| f.flags & END_STREAM != 0;
    let (frames, after): (Vec<Frame>, Vec<Frame>) = frames
        .iter()
        .partition(|f| f.kind == HEADERS || f.kind == DATA);
    if let Some(reset) = after
        .iter()
        .find(|f| f.kind == RST_STREAM && f.error != Some(0))
    {
        return Err(format!("reset with an error: {reset:?}"));
    }
    match frames.as_slice() {
        [only] if only.kind == HEADERS && ends(only) => Ok(()),
        [head, middle @ .., last]
            if head.kind == HEADERS
                && !ends(head)
                && last.kind == HEADERS
                && ends(last)
                && middle.iter().all(|f| f.kind == DATA && !ends(f)) =>
        {
            Ok(())
        }
        other => Err(format!("not a gRPC response: {other:?}")),
    }
}

/// A debit sent with `h2`: the answer's headers, body and trailers.
async fn debit(
    send: &mut h2::client::SendRequest<Bytes>,
    authority: &str,
    key: Option<&str>,
    account: &str,
    amount: u64,
) -> (HeaderMap, Vec<u8>, Option<HeaderMap>) {
    debit_encoded(send, authority, key, account, amount, None).await
}

/// [`debit`] whose message says it is compressed with `encoding`.
async fn debit_encoded(
    send: &mut h2::client::SendRequest<Bytes>,
    authority: &str,
    key: Option<&str>,
    account: &str,
    amount: u64,
    encoding: Option<&str>,
) -> (HeaderMap, Vec<u8>, Option<HeaderMap>) {
    let headers = encoding.map(|e| ("grpc-encoding", e));
    debit_with(send, authority, key, account, amount, headers).await
}

/// [`debit`] with one more header.
async fn debit_with(
    send: &mut h2::client::SendRequest<Bytes>,
    authority: &str,
    key: Option<&str>,
    account: &str,
    amount: u64,
    header: Option<(&str, &str)>,
) -> (HeaderMap, Vec<u8>, Option<HeaderMap>) {
    let encoding = header
        .filter(|(name, _)| *name == "grpc-encoding")
        .map(|(_, v)| v);
    let mut request = Request::post(format!("http://{authority}/payments.v1.Ledger/Debit"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let request = request.body(()).expect("request");
    let message = DebitRequest {
        account: account.to_owned(),
        amount,
    }
    .encode_to_vec();
    let mut framed = vec![u8::from(encoding.is_some())];
    framed.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    framed.extend_from_slice(&message);
    let mut ready = send.clone().ready().await.expect("ready");
    let (response, mut body) = ready.send_request(request, false).expect("send");
    body.send_data(Bytes::from(framed), true).expect("data");
    let response = response.await.expect("response");
    let (parts, mut body) = response.into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("chunk");
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.expect("trailers");
    (parts.headers, data, trailers)
}

fn grpc_status(headers: &HeaderMap, trailers: Option<&HeaderMap>) -> Option<String> {
    trailers
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_live_and_replayed_is_a_valid_grpc_response_frame_by_frame() {
    let (proxy, seen) = recording_proxy(server().await).await;
    let tcp = TcpStream::connect(&proxy).await.expect("connect");
    let (mut send, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // (what, key, account, amount, the grpc-status expected), each sent twice
    // where a key makes the second a replay.
    let calls: [(&str, Option<&str>, &str, u64, &str); 6] = [
        ("a debit", Some("f-ok"), "ana", 100, "0"),
        (
            "an amount the method refuses",
            Some("f-zero"),
            "ana",
            0,
            "3",
        ),
        ("insufficient funds", Some("f-poor"), "ana", 1_000_000, "9"),
        ("no key (idem refuses)", None, "ana", 100, "3"),
        (
            "a key reused for another amount",
            Some("f-ok"),
            "ana",
            200,
            "9",
        ),
        (
            "a malformed account",
            Some("f-bad"),
            "not an account!",
            100,
            "3",
        ),
    ];
    let mut stream = 1;
    let mut expected = Vec::new();
    for (what, key, account, amount, status) in calls {
        for attempt in ["live", "again"] {
            let (headers, _, trailers) = debit(&mut send, &proxy, key, account, amount).await;
            assert_eq!(
                grpc_status(&headers, trailers.as_ref()).as_deref(),
                Some(status),
                "{what} ({attempt}): {headers:?} {trailers:?}"
            );
            expected.push((stream, format!("{what} ({attempt})")));
            stream += 2;
        }
    }
    // Until the proxy has passed on every stream's last frame (or five
    // seconds, and what is still wrong is reported).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let broken = loop {
        let bytes = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let streams = frames_by_stream(&bytes);
        let broken: Vec<String> = expected
            .iter()
            .filter_map(|(stream, what)| {
                let frames = streams.get(stream).map_or(&[][..], Vec::as_slice);
                valid_grpc_response(frames)
                    .err()
                    .map(|why| format!("{what}, stream {stream}: {why}"))
            })
            .collect();
        if broken.is_empty() || std::time::Instant::now() >= deadline {
            break broken;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encoding_the_server_refuses_is_not_recorded_and_the_fallback_call_runs() {
    let addr = server().await;
    let tcp = TcpStream::connect(&addr).await.expect("connect");
    let (mut send, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // A client tries a compression the server does not accept...
    let (headers, _, trailers) =
        debit_encoded(&mut send, &addr, Some("enc-1"), "bea", 100, Some("snappy")).await;
    assert_eq!(
        grpc_status(&headers, trailers.as_ref()).as_deref(),
        Some("12"),
        "UNIMPLEMENTED: {headers:?}"
    );
    // ...and falls back to none, with the same key: the call runs.
    let (headers, body, trailers) = debit(&mut send, &addr, Some("enc-1"), "bea", 100).await;
    assert_eq!(
        grpc_status(&headers, trailers.as_ref()).as_deref(),
        Some("0")
    );
    assert!(headers.get("idempotent-replayed").is_none(), "not a replay");
    assert!(!body.is_empty(), "a receipt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_whose_deadline_passes_mid_debit_get_deadline_exceeded_and_are_debited_once() {
    let addr = slow_server(Duration::from_millis(400)).await;
    let tcp = TcpStream::connect(&addr).await.expect("connect");
    let (send, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // 32 clients whose deadline (100 ms, `grpc-timeout`, no deadline of
    // their own) passes while their debit runs.
    let calls: Vec<_> = (0..32)
        .map(|i| {
            let (mut send, addr) = (send.clone(), addr.clone());
            tokio::spawn(async move {
                let (headers, _, trailers) = debit_with(
                    &mut send,
                    &addr,
                    Some(&format!("late-{i}")),
                    &format!("late{i}"),
                    100,
                    Some(("grpc-timeout", "100m")),
                )
                .await;
                grpc_status(&headers, trailers.as_ref())
            })
        })
        .collect();
    let mut codes = Vec::new();
    for call in calls {
        codes.push(call.await.expect("call"));
    }
    assert!(
        codes.iter().all(|c| c.as_deref() == Some("4")),
        "every call gets DEADLINE_EXCEEDED (4): {codes:?}"
    );
    // The debits were not cancelled: each retry gets its receipt, once
    // (ABORTED while its debit still runs, then the recorded receipt).
    let mut send = send;
    for i in 0..32 {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let (headers, body, trailers) = loop {
            let answer = debit(
                &mut send,
                &addr,
                Some(&format!("late-{i}")),
                &format!("late{i}"),
                100,
            )
            .await;
            let aborted = grpc_status(&answer.0, answer.2.as_ref()).as_deref() == Some("10");
            if !aborted || std::time::Instant::now() >= deadline {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(
            grpc_status(&headers, trailers.as_ref()).as_deref(),
            Some("0")
        );
        assert!(
            headers.get("idempotent-replayed").is_some(),
            "the first run's receipt"
        );
        assert!(!body.is_empty());
    }
}
