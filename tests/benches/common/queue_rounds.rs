//! The queue benchmark's rounds on each broker: a round of one variant
//! (idem on a store, or the bare consumer) consuming the round's messages
//! from RabbitMQ, JetStream or a Redis Stream.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use idem_queue::async_nats;
use idem_queue::async_nats::jetstream::{self, consumer, stream};
use idem_queue::lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeleteOptions,
};
use idem_queue::lapin::types::FieldTable;
use idem_queue::lapin::{BasicProperties, Connection, ConnectionProperties};

use crate::{engine, forget, payload, timed, with_idem, Error, Plain, Run, Variant, MESSAGES};

pub(crate) async fn rabbitmq_round(variant: Variant, round: usize) -> Result<Duration, Error> {
    const BROKER: &str = "rabbitmq";
    let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let queue = format!("idem-bench-{}-{round}-{variant:?}", std::process::id());
    idem_queue::rabbitmq::declare_quorum_queue(&channel, &queue).await?;
    let mut confirms = Vec::with_capacity(MESSAGES);
    for i in 0..MESSAGES {
        confirms.push(
            channel
                .basic_publish(
                    "".into(),
                    queue.as_str().into(),
                    BasicPublishOptions::default(),
                    payload(round, i).as_bytes(),
                    BasicProperties::default(),
                )
                .await?,
        );
    }
    for c in confirms {
        c.await?;
    }
    let handled = Arc::new(AtomicUsize::new(0));
    // The consumer on a connection of its own, closed after the round.
    let consumer_connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let consuming = consumer_connection.create_channel().await?;
    let run: Run = if matches!(variant, Variant::Bare | Variant::Least) {
        let (handled, queue) = (Arc::clone(&handled), queue.clone());
        let plain = Plain::new(variant, BROKER, round).await?;
        Box::pin(async move {
            consuming.basic_qos(16, BasicQosOptions::default()).await?;
            let deliveries = consuming
                .basic_consume(
                    queue.as_str().into(),
                    "".into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            let mut deliveries = deliveries.ready_chunks(16);
            while let Some(ready) = deliveries.next().await {
                let ready = ready.into_iter().collect::<Result<Vec<_>, _>>()?;
                let (handled, plain) = (Arc::clone(&handled), plain.clone());
                tokio::spawn(async move {
                    let payloads: Vec<&[u8]> = ready.iter().map(|d| d.data.as_slice()).collect();
                    if let Err(e) = plain.handle(&payloads, &handled).await {
                        eprintln!("a batch failed: {e}");
                        return;
                    }
                    futures_util::future::join_all(
                        ready
                            .iter()
                            .map(|delivery| delivery.acker.ack(BasicAckOptions::default())),
                    )
                    .await;
                });
            }
            Ok(())
        })
    } else {
        let consumer = with_idem(engine(variant, BROKER, round).await, Arc::clone(&handled));
        let queue = queue.clone();
        Box::pin(async move {
            idem_queue::rabbitmq::consume(
                consumer,
                url,
                &queue,
                idem_queue::rabbitmq::RabbitOptions::default(),
            )
            .await
            .map_err(Into::into)
        })
    };
    let took = timed(run, &handled).await;
    forget(BROKER, round, variant).await?;
    let _ = consumer_connection.close(200, "round over".into()).await;
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    channel
        .queue_delete(
            format!("{queue}.dead").into(),
            QueueDeleteOptions::default(),
        )
        .await?;
    Ok(took)
}

pub(crate) async fn nats_round(variant: Variant, round: usize) -> Result<Duration, Error> {
    const BROKER: &str = "nats";
    let js = jetstream::new(async_nats::connect("nats://127.0.0.1:4222").await?);
    let name = format!("IDEM_BENCH_{}_{round}_{variant:?}", std::process::id());
    let orders = js
        .get_or_create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.placed")],
            ..stream::Config::default()
        })
        .await?;
    let mut acks = Vec::with_capacity(MESSAGES);
    for i in 0..MESSAGES {
        acks.push(
            js.publish(format!("{name}.placed"), payload(round, i).into())
                .await?,
        );
    }
    for a in acks {
        a.await?;
    }
    let pull = orders
        .get_or_create_consumer(
            "bench",
            consumer::pull::Config {
                durable_name: Some("bench".to_owned()),
                ..consumer::pull::Config::default()
            },
        )
        .await?;
    let handled = Arc::new(AtomicUsize::new(0));
    let run: Run = if matches!(variant, Variant::Bare | Variant::Least) {
        let handled = Arc::clone(&handled);
        let plain = Plain::new(variant, BROKER, round).await?;
        Box::pin(async move {
            let permits = Arc::new(tokio::sync::Semaphore::new(16));
            let mut messages = pull.messages().await?.ready_chunks(16);
            while let Some(ready) = messages.next().await {
                let mut batch = Vec::with_capacity(ready.len());
                for message in ready {
                    batch.push((message?, Arc::clone(&permits).acquire_owned().await?));
                }
                let (handled, plain) = (Arc::clone(&handled), plain.clone());
                tokio::spawn(async move {
                    let payloads: Vec<&[u8]> = batch.iter().map(|(m, _)| &m.payload[..]).collect();
                    if let Err(e) = plain.handle(&payloads, &handled).await {
                        eprintln!("a batch failed: {e}");
                        return;
                    }
                    futures_util::future::join_all(batch.into_iter().map(
                        |(message, permit)| async move {
                            let _ = message.double_ack().await;
                            drop(permit);
                        },
                    ))
                    .await;
                });
            }
            Ok(())
        })
    } else {
        let consumer = with_idem(engine(variant, BROKER, round).await, Arc::clone(&handled));
        let options = idem_queue::nats::JetStreamOptions::default().durable("bench");
        let (js, name) = (js.clone(), name.clone());
        Box::pin(async move {
            idem_queue::nats::consume(consumer, js, &name, options)
                .await
                .map_err(Into::into)
        })
    };
    let took = timed(run, &handled).await;
    forget(BROKER, round, variant).await?;
    js.delete_stream(&name).await?;
    Ok(took)
}

pub(crate) async fn redis_round(variant: Variant, round: usize) -> Result<Duration, Error> {
    const BROKER: &str = "redis";
    let client = redis::Client::open("redis://127.0.0.1:6379")?;
    let mut c = client.get_multiplexed_async_connection().await?;
    let stream = format!(
        "idem-bench:stream:{}:{round}:{variant:?}",
        std::process::id()
    );
    let mut pipe = redis::pipe();
    for i in 0..MESSAGES {
        pipe.cmd("XADD")
            .arg(&stream)
            .arg("*")
            .arg("payload")
            .arg(payload(round, i))
            .ignore();
    }
    let () = pipe.query_async(&mut c).await?;
    let handled = Arc::new(AtomicUsize::new(0));
    let run: Run = if matches!(variant, Variant::Bare | Variant::Least) {
        let (handled, stream, client) = (Arc::clone(&handled), stream.clone(), client.clone());
        let plain = Plain::new(variant, BROKER, round).await?;
        Box::pin(async move { bare_stream(client, &stream, &plain, &handled).await })
    } else {
        let consumer = with_idem(engine(variant, BROKER, round).await, Arc::clone(&handled));
        let options = idem_queue::redis_streams::StreamOptions::default()
            .group("bench")
            .consumer("bench-1");
        let (client, stream) = (client.clone(), stream.clone());
        Box::pin(async move {
            idem_queue::redis_streams::consume(consumer, client, &stream, options)
                .await
                .map_err(Into::into)
        })
    };
    let took = timed(run, &handled).await;
    forget(BROKER, round, variant).await?;
    let _: u64 = redis::cmd("DEL").arg(&stream).query_async(&mut c).await?;
    Ok(took)
}

/// The Redis Stream consumer without idem.
pub(crate) async fn bare_stream(
    client: redis::Client,
    stream: &str,
    plain: &Plain,
    handled: &AtomicUsize,
) -> Result<(), Error> {
    let mut reads = client.get_multiplexed_async_connection().await?;
    let acks = client.get_multiplexed_async_connection().await?;
    let _: redis::Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg("bench")
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut reads)
        .await?;
    loop {
        let _: redis::Value = redis::cmd("XPENDING")
            .arg(stream)
            .arg("bench")
            .arg("IDLE")
            .arg(30_000)
            .arg("-")
            .arg("+")
            .arg(16)
            .query_async(&mut reads)
            .await?;
        let read: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("bench")
            .arg("bench-1")
            .arg("COUNT")
            .arg(16)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(stream)
            .arg(">")
            .query_async(&mut reads)
            .await?;
        let read = entries(&read);
        let payloads: Vec<&[u8]> = read.iter().map(|(_, data)| data.as_slice()).collect();
        plain.handle(&payloads, handled).await?;
        futures_util::future::join_all(read.iter().map(|(id, _)| {
            let mut acks = acks.clone();
            async move {
                let _: redis::RedisResult<u64> = redis::cmd("XACK")
                    .arg(stream)
                    .arg("bench")
                    .arg(id)
                    .query_async(&mut acks)
                    .await;
            }
        }))
        .await;
    }
}

/// `XREADGROUP`'s reply as (entry id, payload) pairs.
pub(crate) fn entries(read: &redis::Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    use redis::Value::{Array, BulkString};
    let mut out = Vec::new();
    let Array(streams) = read else { return out };
    for s in streams {
        let Array(parts) = s else { continue };
        let Some(Array(items)) = parts.get(1) else {
            continue;
        };
        for item in items {
            let Array(entry) = item else { continue };
            if let (Some(BulkString(id)), Some(Array(fields))) = (entry.first(), entry.get(1)) {
                if let Some(BulkString(data)) = fields.get(1) {
                    out.push((id.clone(), data.clone()));
                }
            }
        }
    }
    out
}
