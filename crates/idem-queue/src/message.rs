//! `Message`: what the pipeline reads of a delivery, whatever the broker.

use bytes::Bytes;

/// One delivery of a message, as the pipeline sees it: its payload, the
/// broker's message id, its headers and how many times it was delivered.
#[derive(Clone, Debug, Default)]
pub struct Message {
    /// The payload (JSON).
    pub payload: Bytes,
    /// The message id the producer gave (AMQP `message-id`, JetStream
    /// `Nats-Msg-Id`, a stream entry's `id` field), if any.
    pub id: Option<String>,
    /// The headers, in the order the broker gave them.
    pub headers: Vec<(String, String)>,
    /// Deliveries of this message so far, this one included (1 the first
    /// time), as far as the broker counts them.
    pub deliveries: u32,
}

impl Message {
    /// A message with `payload`, delivered once.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Self {
            payload: payload.into(),
            deliveries: 1,
            ..Self::default()
        }
    }

    /// With the message id `id`.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// With the header `name: value`.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Delivered `deliveries` times, this one included.
    #[must_use]
    pub fn delivered(mut self, deliveries: u32) -> Self {
        self.deliveries = deliveries;
        self
    }

    /// The first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
