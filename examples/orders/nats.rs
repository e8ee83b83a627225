//! Ships orders from a NATS JetStream stream, each once:
//! `cargo run --example orders_nats`. Settings: `NATS_URL`
//! (nats://127.0.0.1:4222), `STREAM` (ORDERS: subjects `<stream>.placed`;
//! dead letters on `<stream>.dead`, kept by the stream `<stream>_DEAD`),
//! `ACK_WAIT_MS` (30000), and those of
//! [`Settings`](idem_examples::shipping::Settings).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use idem_examples::shipping::Settings;
use idem_queue::nats::{consume, JetStreamOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env();
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let name = std::env::var("STREAM").unwrap_or_else(|_| "ORDERS".to_owned());
    let ack_wait = Duration::from_millis(
        std::env::var("ACK_WAIT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30_000),
    );
    let consumer_ = Arc::new(settings.consumer().await?);
    let js = jetstream::new(async_nats::connect(&url).await?);
    let orders = js
        .get_or_create_stream(stream::Config {
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
    let pull = orders
        .get_or_create_consumer(
            "shippers",
            consumer::pull::Config {
                durable_name: Some("shippers".to_owned()),
                ack_wait,
                ..consumer::pull::Config::default()
            },
        )
        .await?;
    println!("consuming {name}");
    let options = JetStreamOptions {
        dead_letter_subject: format!("{name}.dead"),
        parallelism: 16,
    };
    // The client reconnects by itself; a message stream that ends is
    // asked for again.
    loop {
        if let Err(e) = consume(
            Arc::clone(&consumer_),
            js.clone(),
            pull.clone(),
            options.clone(),
        )
        .await
        {
            eprintln!("orders_nats: {e}; consuming again in a second");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
