//! Ships orders from a Redis Stream through a consumer group, each once:
//! `cargo run --example orders_redis_streams`. Settings: `STREAM`
//! (orders:placed; dead letters to `<stream>:dead`), `GROUP` (shippers),
//! `CONSUMER` (this process's name in the group; default `shipper-<pid>`),
//! `MIN_IDLE_MS` (an entry pending this long is taken over; default: the
//! claim's lease, `LEASE_MS`),
//! `STREAM_REDIS_URL` (the stream's Redis, if not the records' `REDIS_URL`), and
//! those of [`Settings`](idem_examples::shipping::Settings). Each entry's
//! `payload` field is the order (JSON). A lost connection is made again
//! with a backoff; SIGTERM or Ctrl-C stops taking orders, lets the running
//! ones finish, and exits.

use std::sync::Arc;
use std::time::Duration;

use idem_examples::shipping::Settings;
use idem_queue::redis_streams::{consume, StreamOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env();
    let var = |name: &str, default: String| std::env::var(name).unwrap_or(default);
    let stream = var("STREAM", "orders:placed".to_owned());
    let mut options = StreamOptions::default()
        .group(&var("GROUP", "shippers".to_owned()))
        .consumer(&var("CONSUMER", format!("shipper-{}", std::process::id())))
        .running(settings.running());
    // Unset, an entry is taken over once idle for the claim's lease
    // (`LEASE_MS`).
    options.min_idle = var("MIN_IDLE_MS", String::new())
        .parse()
        .ok()
        .map(Duration::from_millis);
    let consumer = Arc::new(settings.consumer().await?);
    let client =
        idem_queue::redis::Client::open(var("STREAM_REDIS_URL", settings.redis_url.clone()))?;
    println!("consuming {stream}");
    consume(consumer, client, &stream, options).await?;
    println!("stopped");
    Ok(())
}
