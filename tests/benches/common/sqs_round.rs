//! The queue benchmark's round on SQS (moto's server, an emulator that
//! speaks SQS's wire protocol, on 127.0.0.1:4566): its absolute rate says
//! nothing of SQS, the ratio of each variant to the consumer without idem
//! says what idem adds.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use idem_queue::aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry,
};
use idem_queue::aws_sdk_sqs::Client;

use crate::{
    engine, forget, payload, timed_for, with_idem, Error, Plain, Run, Variant, SQS_MESSAGES,
};

pub(crate) async fn sqs_round(variant: Variant, round: usize) -> Result<Duration, Error> {
    const BROKER: &str = "sqs";
    let client = idem_tests::sqs_queue::sqs_client();
    let name = format!("idem-bench-{}-{round}-{variant:?}", std::process::id());
    let made = client.create_queue().queue_name(&name).send().await?;
    let url = made.queue_url().ok_or("no queue url")?.to_owned();
    for chunk in (0..SQS_MESSAGES).collect::<Vec<_>>().chunks(10) {
        let entries = chunk
            .iter()
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(payload(round, *i))
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        client
            .send_message_batch()
            .queue_url(&url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    let handled = Arc::new(AtomicUsize::new(0));
    let run: Run = if matches!(variant, Variant::Bare | Variant::Least) {
        let (handled, url, client) = (Arc::clone(&handled), url.clone(), client.clone());
        let plain = Plain::new(variant, BROKER, round).await?;
        Box::pin(async move { bare_sqs(&client, &url, &plain, &handled).await })
    } else {
        let consumer = with_idem(engine(variant, BROKER, round).await, Arc::clone(&handled));
        let options = idem_queue::sqs::SqsOptions::default().wait(Duration::from_secs(1));
        let (client, url) = (client.clone(), url.clone());
        Box::pin(async move {
            idem_queue::sqs::consume(consumer, client, &url, options)
                .await
                .map_err(Into::into)
        })
    };
    let took = timed_for(run, &handled, SQS_MESSAGES).await;
    forget(BROKER, round, variant).await?;
    client.delete_queue().queue_url(&url).send().await?;
    let _ = client
        .delete_queue()
        .queue_url(format!("{url}-dead"))
        .send()
        .await;
    Ok(took)
}

/// The SQS consumer without idem, as the adapter does it: long polls of
/// ten, the batch handled, its messages deleted in one call.
async fn bare_sqs(
    client: &Client,
    url: &str,
    plain: &Plain,
    handled: &AtomicUsize,
) -> Result<(), Error> {
    loop {
        let received = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .visibility_timeout(60)
            .send()
            .await?;
        let messages = received.messages();
        if messages.is_empty() {
            continue;
        }
        let payloads: Vec<&[u8]> = messages
            .iter()
            .map(|m| m.body().unwrap_or_default().as_bytes())
            .collect();
        plain.handle(&payloads, handled).await?;
        let entries = messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle()?)
                    .build()
                    .ok()
            })
            .collect();
        client
            .delete_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
}
