//! What a dead letter carries beside the message, named the same on every
//! broker: an AMQP header, a NATS header, a Redis Stream entry's field.

/// Why the message was dead-lettered (the verdict's reason: the last error,
/// a reused key, a malformed message).
pub const DEAD_LETTER_REASON: &str = "idem-reason";

/// Where the message was consumed from: the queue, the subject or the
/// stream.
pub const DEAD_LETTER_SOURCE: &str = "idem-source";
