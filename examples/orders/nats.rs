//! Ships orders from a NATS JetStream stream, each once:
//! `cargo run --example orders_nats`. Settings: `NATS_URL`
//! (nats://127.0.0.1:4222), `STREAM` (ORDERS: subjects `<stream>.placed`;
//! dead letters on `<stream>.dead`, kept by the stream `<stream>_DEAD`),
//! `ACK_WAIT_MS` (default: the claim's lease, `LEASE_MS`), and those of
//! [`Settings`](idem_examples::shipping::Settings). The client reconnects
//! by itself, and the consumer asks for its messages again; SIGTERM or
//! Ctrl-C stops taking orders, lets the running ones finish, and exits.

use std::sync::Arc;
use std::time::Duration;

use idem_examples::shipping::Settings;
use idem_queue::async_nats::{self, jetstream, jetstream::stream};
use idem_queue::nats::{consume, JetStreamOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env();
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let name = std::env::var("STREAM").unwrap_or_else(|_| "ORDERS".to_owned());
    // Unset, the ack wait is the claim's lease (`LEASE_MS`).
    let ack_wait = std::env::var("ACK_WAIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let consumer = Arc::new(settings.consumer().await?);
    let js = jetstream::new(async_nats::connect(&url).await?);
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("{name}.placed")],
        ..stream::Config::default()
    })
    .await?;
    js.get_or_create_stream(stream::Config {
        name: format!("{name}_DEAD"),
        subjects: vec![format!("{name}.dead")],
        ..stream::Config::default()
    })
    .await?;
    let mut options = JetStreamOptions::default()
        .durable("shippers")
        .running(settings.running());
    options.ack_wait = ack_wait;
    println!("consuming {name}");
    consume(consumer, js, &name, options).await?;
    println!("stopped");
    Ok(())
}
