//! Where an SQS consumer's dead letters go: a queue named for them, or the
//! consumed queue's own redrive policy (`idem_queue::sqs`).

use aws_sdk_sqs::types::QueueAttributeName;
use aws_sdk_sqs::Client;

use crate::delivery::BrokerError;
use crate::running::Ended;
use crate::sqs_errors::ended;

/// Where a dead-letter verdict sends its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeadLetters {
    /// `SendMessage` to this queue, with the reason, then `DeleteMessage`.
    Queue(String),
    /// Left to the queue's redrive policy: the message is made visible
    /// again at once, and SQS moves it to `target` when it is received more
    /// than `max_receives` times (the reason is logged).
    Redrive {
        /// The dead-letter queue's ARN.
        target: String,
        /// The policy's `maxReceiveCount`.
        max_receives: u32,
    },
}

/// Where `queue_url`'s dead letters go: `named` if the consumer was given a
/// queue; else the queue's redrive policy if it has one; else
/// `<queue>-dead`, made if missing.
pub(crate) async fn dead_letters(
    client: &Client,
    queue_url: &str,
    fifo: bool,
    named: Option<&str>,
    max_deliveries: u32,
) -> Result<DeadLetters, Ended> {
    if let Some(url) = named {
        return Ok(DeadLetters::Queue(url.to_owned()));
    }
    let attributes = client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .map_err(ended("GetQueueAttributes"))?;
    let policy = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy));
    let Some(policy) = policy.filter(|p| !p.trim().is_empty()) else {
        return dead_letter_queue(client, queue_url, fifo)
            .await
            .map(DeadLetters::Queue);
    };
    let redrive = redrive_of(policy).map_err(|why| {
        Ended::Refused(BrokerError::new(
            "sqs GetQueueAttributes",
            format!("the queue's RedrivePolicy {policy:?} cannot be read: {why}"),
        ))
    })?;
    if let DeadLetters::Redrive {
        target,
        max_receives,
    } = &redrive
    {
        tracing::info!(target: "idem", queue = queue_url, dead_letters = %target, max_receives, "sqs: dead letters are left to the queue's redrive policy");
        if *max_receives > max_deliveries {
            tracing::warn!(target: "idem", queue = queue_url, max_receives, max_deliveries, "sqs: the queue's redrive policy moves a message only after more receives than the consumer's max_deliveries; a message that keeps failing runs up to maxReceiveCount times");
        }
    }
    Ok(redrive)
}

/// A redrive policy's target and count (`maxReceiveCount` comes as a
/// number or as a string of one).
fn redrive_of(policy: &str) -> Result<DeadLetters, String> {
    let policy: serde_json::Value = serde_json::from_str(policy).map_err(|e| e.to_string())?;
    let target = policy
        .get("deadLetterTargetArn")
        .and_then(serde_json::Value::as_str)
        .ok_or("it names no deadLetterTargetArn")?;
    let count = policy.get("maxReceiveCount");
    let max_receives = count
        .and_then(serde_json::Value::as_u64)
        .or_else(|| count?.as_str()?.parse().ok())
        .and_then(|n| u32::try_from(n).ok())
        .ok_or("its maxReceiveCount is not a count")?;
    Ok(DeadLetters::Redrive {
        target: target.to_owned(),
        max_receives,
    })
}

/// The queue's dead-letter queue: `<queue>-dead` (`.fifo` kept last), made
/// if missing.
async fn dead_letter_queue(client: &Client, queue_url: &str, fifo: bool) -> Result<String, Ended> {
    let name = queue_url.rsplit('/').next().unwrap_or(queue_url);
    let dead = match name.strip_suffix(".fifo") {
        Some(base) => format!("{base}-dead.fifo"),
        None => format!("{name}-dead"),
    };
    let mut create = client.create_queue().queue_name(&dead);
    if fifo {
        create = create.attributes(QueueAttributeName::FifoQueue, "true");
    }
    let made = create.send().await.map_err(ended("CreateQueue"))?;
    made.queue_url()
        .map(str::to_owned)
        .ok_or_else(|| Ended::Refused(BrokerError::new("sqs CreateQueue", "no queue url answered")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redrive_policy_is_read_with_its_count_as_a_number_or_a_string() {
        let arn = "arn:aws:sqs:us-east-1:000000000000:orders-dead";
        for policy in [
            format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":5}}"#),
            format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"5"}}"#),
        ] {
            assert_eq!(
                redrive_of(&policy),
                Ok(DeadLetters::Redrive {
                    target: arn.to_owned(),
                    max_receives: 5
                })
            );
        }
    }

    #[test]
    fn a_redrive_policy_without_a_target_or_a_count_says_which() {
        let no_target = redrive_of(r#"{"maxReceiveCount":5}"#);
        assert!(
            no_target
                .as_ref()
                .is_err_and(|e| e.contains("deadLetterTargetArn")),
            "{no_target:?}"
        );
        let no_count = redrive_of(r#"{"deadLetterTargetArn":"arn:x","maxReceiveCount":"many"}"#);
        assert!(
            no_count
                .as_ref()
                .is_err_and(|e| e.contains("maxReceiveCount")),
            "{no_count:?}"
        );
        assert!(redrive_of("not json").is_err());
    }
}
