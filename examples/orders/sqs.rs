//! Ships orders from an Amazon SQS queue, each once:
//! `cargo run --example orders_sqs`. Settings: `QUEUE` (orders; made if
//! missing; dead letters to `<queue>-dead`), `SQS_ENDPOINT` (default
//! moto's server, http://127.0.0.1:4566, where idem is tested; on AWS,
//! SQS's own), `AWS_REGION` (us-east-1), `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY` (default `test`, what the emulator takes),
//! `VISIBILITY_MS` (a received message stays hidden this long and the
//! heartbeat hides it again; default: the claim's lease, `LEASE_MS`), and
//! those of [`Settings`](idem_examples::shipping::Settings). Each message's
//! body is the order (JSON). SIGTERM or Ctrl-C stops taking orders, lets
//! the running ones finish, and exits.
//!
//! A service on AWS builds its client with `aws-config` (its role's
//! credentials and region) instead of these settings.

use std::sync::Arc;
use std::time::Duration;

use idem_examples::shipping::Settings;
use idem_queue::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use idem_queue::aws_sdk_sqs::{Client, Config};
use idem_queue::sqs::{consume, SqsOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env();
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let config = Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(var("AWS_REGION", "us-east-1")))
        .endpoint_url(var("SQS_ENDPOINT", "http://127.0.0.1:4566"))
        .credentials_provider(Credentials::new(
            var("AWS_ACCESS_KEY_ID", "test"),
            var("AWS_SECRET_ACCESS_KEY", "test"),
            None,
            None,
            "environment",
        ))
        .build();
    let client = Client::from_conf(config);
    let queue = var("QUEUE", "orders");
    let made = client.create_queue().queue_name(&queue).send().await?;
    let url = made
        .queue_url()
        .ok_or("SQS answered no queue url")?
        .to_owned();
    let mut options = SqsOptions::default().running(settings.running());
    // Unset, a message stays hidden for the claim's lease (`LEASE_MS`).
    options.visibility = std::env::var("VISIBILITY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let consumer = Arc::new(settings.consumer().await?);
    println!("consuming {queue}");
    consume(consumer, client, &url, options).await?;
    println!("stopped");
    Ok(())
}
