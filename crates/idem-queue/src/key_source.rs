//! `KeySource`: where a message's idempotency key comes from.

use crate::message::Message;

/// Where the pipeline finds a message's idempotency key. The producer must
/// give every logical message one key and keep it on every resend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// The broker's message id (AMQP `message-id`, JetStream `Nats-Msg-Id`,
    /// a Redis Stream entry's `id` field). On JetStream the server itself
    /// drops a second publish with the same `Nats-Msg-Id` within the
    /// stream's duplicate window, whatever its payload: a key reused with
    /// another payload is then acknowledged to its producer and never
    /// reaches the consumer, so idem cannot refuse it. Key JetStream
    /// messages by a header or a field the broker does not consume.
    MessageId,
    /// A header.
    Header(String),
    /// A field of the JSON payload, as a JSON pointer (`/order_id`); a
    /// number or a string.
    Field(String),
}

impl KeySource {
    /// The key of `message` whose payload parsed as `payload`, or why there
    /// is none.
    pub(crate) fn key_of(
        &self,
        message: &Message,
        payload: &serde_json::Value,
    ) -> Result<String, String> {
        match self {
            Self::MessageId => message
                .id
                .clone()
                .ok_or_else(|| "the message has no message id to key it by".to_owned()),
            Self::Header(name) => message
                .header(name)
                .map(str::to_owned)
                .ok_or_else(|| format!("the message has no `{name}` header to key it by")),
            Self::Field(pointer) => match payload.pointer(pointer) {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
                Some(other) => Err(format!(
                    "the payload's `{pointer}` is {other}, not a string or a number to key it by"
                )),
                None => Err(format!("the payload has no `{pointer}` to key it by")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_source_finds_its_key_or_says_what_is_missing() {
        let payload = serde_json::json!({"order": {"id": 42}, "sku": "tea", "qty": [1]});
        let message = Message::new("{}")
            .with_id("m-1")
            .with_header("Order-Key", "k-9");
        let key = |s: KeySource| s.key_of(&message, &payload);
        assert_eq!(key(KeySource::MessageId), Ok("m-1".to_owned()));
        assert_eq!(
            key(KeySource::Header("order-key".into())),
            Ok("k-9".to_owned())
        );
        assert_eq!(
            key(KeySource::Field("/order/id".into())),
            Ok("42".to_owned())
        );
        assert_eq!(key(KeySource::Field("/sku".into())), Ok("tea".to_owned()));
        let missing = |s: KeySource| s.key_of(&Message::new("{}"), &payload).unwrap_err();
        assert!(missing(KeySource::MessageId).contains("no message id"));
        assert!(missing(KeySource::Header("X".into())).contains("no `X` header"));
        assert!(key(KeySource::Field("/qty".into()))
            .unwrap_err()
            .contains("not a string"));
        assert!(key(KeySource::Field("/nope".into()))
            .unwrap_err()
            .contains("no `/nope`"));
    }
}
