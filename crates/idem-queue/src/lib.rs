//! # idem-queue
//!
//! Queue consumers whose messages take effect exactly once, on idem. A
//! broker delivers at least once: a consumer that dies before its ack, a
//! redelivery after an ack deadline, a producer that publishes twice. The
//! [`Consumer`] runs each message's [`Handler`] under idem's engine, keyed
//! by the message (its id, a header or a payload field), and tells the
//! broker what to do from what happened: ack only once the outcome is
//! stored, redeliver later (never in a hot loop) what could not finish,
//! dead-letter what must never run or keeps failing, and never ack a
//! duplicate whose first delivery may still be running elsewhere (the table
//! is on [`Consumer`]).
//!
//! The pipeline is written once; each broker is an adapter that reads a
//! delivery into a [`Message`] and carries out the [`Action`]:
//!
//! - [`rabbitmq`] (feature `rabbitmq`, `lapin`);
//! - [`nats`] (feature `nats`, `async-nats`, JetStream pull consumers);
//! - [`redis_streams`] (feature `redis-streams`, consumer groups).
//!
//! A consumer frozen past its broker's ack deadline and its claim's lease
//! while another consumer runs the redelivered message must not land its
//! effect when it wakes: no broker can tell which delivery an ack belongs
//! to. idem's claim does: commit the effect with the record
//! ([`idem_core::Claim::commit`]), or pass its fencing token to where the
//! effect lands.
//!
//! ```
//! use idem_core::{Engine, MemoryStore, Never};
//! use idem_queue::{handler_fn, Consumer, KeySource};
//!
//! #[derive(serde::Deserialize)]
//! struct OrderPlaced { order_id: String, sku: String }
//!
//! let consumer = Consumer::new(
//!     Engine::new(MemoryStore::new()),
//!     "ship-order",
//!     handler_fn(|order: OrderPlaced, _claim| async move {
//!         // ship it; the shipment id is recorded and replayed
//!         Ok::<_, Never>(format!("shipment of {} for {}", order.sku, order.order_id))
//!     }),
//! )
//! .key(KeySource::Field("/order_id".into()));
//! # let _ = consumer;
//! ```

mod backoff;
mod batch;
mod commit;
mod consumer;
mod dead_letter;
mod delivery;
mod handler;
mod key_source;
mod message;
#[cfg(feature = "nats")]
mod permitted;
// What only the brokers' loops use is unused without a broker feature.
#[cfg_attr(
    not(any(
        feature = "rabbitmq",
        feature = "nats",
        feature = "redis-streams",
        feature = "sqs"
    )),
    allow(dead_code)
)]
mod running;
#[cfg(feature = "redis-streams")]
mod stream_entries;
mod verdict;

#[cfg(feature = "lambda")]
pub mod lambda;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "rabbitmq")]
mod rabbit_options;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;
#[cfg(feature = "redis-streams")]
pub mod redis_streams;
#[cfg(feature = "sqs")]
pub mod sqs;
#[cfg(feature = "sqs")]
mod sqs_dead_letters;
#[cfg(feature = "sqs")]
mod sqs_errors;
#[cfg(feature = "sqs")]
mod sqs_options;

pub use backoff::Backoff;
pub use batch::{BatchOptions, BatchReport};
pub use commit::commit_with_record;
pub use consumer::{Consumer, DEFAULT_HOLD_WHILE_STORE_DOWN, DEFAULT_MAX_DELIVERIES};
pub use dead_letter::{DEAD_LETTER_REASON, DEAD_LETTER_SOURCE};
pub use delivery::{BrokerError, Delivery};
pub use handler::{handler_fn, Handler, HandlerFn};
pub use idem_core::{shutdown_on_signals, CancellationToken};
pub use key_source::KeySource;
pub use message::Message;
pub use running::{Running, DEFAULT_DRAIN};
pub use verdict::{Action, Handled, Verdict};

/// The AMQP client the RabbitMQ adapter is built on, re-exported so that
/// your connection's types are the ones it takes.
#[cfg(feature = "rabbitmq")]
pub use lapin;

/// The NATS client the JetStream adapter is built on, re-exported so that
/// your client's types are the ones it takes.
#[cfg(feature = "nats")]
pub use async_nats;

/// The Redis client the Redis Streams adapter is built on, re-exported so
/// that your client's types are the ones it takes.
#[cfg(feature = "redis-streams")]
pub use redis;

/// The SQS client the SQS adapter is built on, re-exported so that your
/// client's types are the ones it takes.
#[cfg(feature = "sqs")]
pub use aws_sdk_sqs;
