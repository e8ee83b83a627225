//! Ships orders from a RabbitMQ quorum queue, each once:
//! `cargo run --example orders_rabbitmq`. Settings: `AMQP_URL`
//! (amqp://guest:guest@127.0.0.1:5672/%2f), `QUEUE` (orders; dead letters
//! go to `<queue>.dead`), and those of
//! [`Settings`](idem_examples::shipping::Settings). A lost connection is
//! made again with a backoff; SIGTERM or Ctrl-C stops taking orders, lets
//! the running ones finish, and exits.

use std::sync::Arc;

use idem_examples::shipping::Settings;
use idem_queue::rabbitmq::{consume, RabbitOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env();
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let queue = std::env::var("QUEUE").unwrap_or_else(|_| "orders".to_owned());
    let consumer = Arc::new(settings.consumer().await?);
    // The queue is declared as a quorum queue, which counts deliveries
    // (`x-delivery-count`), so that a poison message is dead-lettered
    // after `MAX_DELIVERIES`.
    let options = RabbitOptions::default().running(settings.running());
    println!("consuming {queue}");
    consume(consumer, &url, &queue, options).await?;
    println!("stopped");
    Ok(())
}
