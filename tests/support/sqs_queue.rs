//! An SQS queue of a test's own on moto's server (the emulator
//! `scripts/services.sh` starts on 127.0.0.1:4566), for the order example
//! `orders_sqs`: orders are published with the AWS SDK's own client.

use idem_queue::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use idem_queue::aws_sdk_sqs::types::QueueAttributeName;
use idem_queue::aws_sdk_sqs::{Client, Config};

use crate::brokers::{Broker, DeadLetter};

/// moto's server, or `IDEM_TEST_SQS`.
pub fn sqs_url() -> String {
    std::env::var("IDEM_TEST_SQS").unwrap_or_else(|_| crate::dynamodb_url())
}

/// A client of the emulator, with the fixed credentials it accepts.
pub fn sqs_client() -> Client {
    let config = Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(sqs_url())
        .credentials_provider(Credentials::new("test", "test", None, None, "idem-tests"))
        .build();
    Client::from_conf(config)
}

/// A queue of the test's own, and its dead-letter queue.
pub struct SqsQueue {
    client: Client,
    /// The queue's name.
    pub name: String,
    url: String,
}

impl SqsQueue {
    /// A new queue.
    pub async fn new() -> Self {
        let client = sqs_client();
        let name = crate::unique_prefix("orders")
            .trim_end_matches(':')
            .replace([':', '.'], "_");
        let made = client
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "an SQS queue at {} (moto: scripts/services.sh): {e}",
                    sqs_url()
                )
            });
        let url = made.queue_url().expect("its url").to_owned();
        Self { client, name, url }
    }

    async fn count(&self, url: &str) -> u64 {
        let got = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("GetQueueAttributes");
        got.attributes()
            .into_iter()
            .flatten()
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum()
    }
}

impl Broker for SqsQueue {
    const EXAMPLE: &'static str = "orders_sqs";

    fn env(&self, redeliver_ms: u64) -> Vec<(&'static str, String)> {
        let mut env = self.default_env();
        env.push(("VISIBILITY_MS", redeliver_ms.to_string()));
        env
    }

    fn default_env(&self) -> Vec<(&'static str, String)> {
        vec![("QUEUE", self.name.clone()), ("SQS_ENDPOINT", sqs_url())]
    }

    async fn publish(&self, payload: &str) {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(payload)
            .send()
            .await
            .expect("SendMessage");
    }

    async fn outstanding(&self) -> u64 {
        self.count(&self.url).await
    }

    async fn dead_letters(&self) -> Vec<DeadLetter> {
        let Ok(dead) = self
            .client
            .get_queue_url()
            .queue_name(format!("{}-dead", self.name))
            .send()
            .await
        else {
            return Vec::new();
        };
        let url = dead.queue_url().unwrap_or_default();
        // Looked at, not taken: hidden for no time at all.
        let got = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .message_attribute_names("All")
            .send()
            .await
            .expect("ReceiveMessage");
        got.messages()
            .iter()
            .map(|m| DeadLetter {
                payload: m.body().unwrap_or_default().to_owned(),
                reason: m
                    .message_attributes()
                    .and_then(|a| a.get(idem_queue::DEAD_LETTER_REASON))
                    .and_then(|v| v.string_value())
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect()
    }

    async fn restart(&mut self) {
        panic!("moto's server keeps its queues in memory: an SQS queue is not restarted");
    }
}
