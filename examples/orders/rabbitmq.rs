//! Ships orders from a RabbitMQ quorum queue, each once:
//! `cargo run --example orders_rabbitmq`. Settings: `AMQP_URL`
//! (amqp://guest:guest@127.0.0.1:5672/%2f), `QUEUE` (orders; dead letters
//! go to `<queue>.dead`), and those of
//! [`Settings`](idem_examples::shipping::Settings). A lost connection is
//! made again after a second; handlers still running finish meanwhile.

use std::sync::Arc;
use std::time::Duration;

use idem_examples::shipping::Settings;
use idem_queue::rabbitmq::{consume, declare_quorum_queue, RabbitOptions};
use idem_queue::Handler;
use lapin::{Connection, ConnectionProperties};

type Error = Box<dyn std::error::Error>;

async fn consume_once<H: Handler>(
    url: &str,
    queue: &str,
    consumer: &Arc<idem_queue::Consumer<H>>,
) -> Result<(), Error> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    // A quorum queue counts deliveries (`x-delivery-count`), so that a
    // poison message is dead-lettered after `MAX_DELIVERIES`.
    declare_quorum_queue(&channel, queue).await?;
    println!("consuming {queue}");
    consume(
        Arc::clone(consumer),
        channel,
        queue,
        RabbitOptions::default(),
    )
    .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let settings = Settings::from_env();
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let queue = std::env::var("QUEUE").unwrap_or_else(|_| "orders".to_owned());
    let consumer = Arc::new(settings.consumer().await?);
    loop {
        if let Err(e) = consume_once(&url, &queue, &consumer).await {
            eprintln!("orders_rabbitmq: {e}; connecting again in a second");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
