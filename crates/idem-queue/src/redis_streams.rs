//! Redis Streams through `redis` (feature `redis-streams`): a consumer
//! group, each entry settled by the [`Consumer`]'s verdict.
//!
//! An entry's `payload` field is the message (JSON), its `id` field the
//! message id the producer gave (the stream's own entry id changes with
//! every `XADD`, so a producer's resend is a new entry); other fields are
//! headers.
//!
//! - **Ack**: `XACK`, after the outcome is stored.
//! - **Redeliver after a delay**: the entry stays pending; its idle time is
//!   set (`XCLAIM .. IDLE .. JUSTID`) so that it becomes claimable
//!   `after` from now, when a consumer of the group takes it over.
//! - **In progress**: the idle time reset (`XCLAIM .. JUSTID`) while the
//!   handler runs, so that no other consumer takes it over.
//! - **Taking over**: entries pending longer than [`StreamOptions::min_idle`]
//!   (a crashed consumer's, or ones set to come back) are claimed first
//!   (`XPENDING .. IDLE`, then `XCLAIM`), with their delivery counts.
//! - **Dead-letter**: `XADD` to the dead-letter stream (`<stream>:dead`)
//!   with the reason, and `XACK`, in one `MULTI`.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::StreamPendingCountReply;
use redis::Value;

use crate::batch::BatchOptions;
use crate::consumer::Consumer;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::running::{supervise, Ended, Running};
use crate::stream_entries::entries;
pub use crate::stream_entries::message_of;
use crate::verdict::{Action, Verdict};

/// How a stream is consumed: `StreamOptions::default()` and its builder
/// methods.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// The consumer group (created at the stream's start if missing).
    pub group: String,
    /// This consumer's name in the group (unique per process).
    pub consumer: String,
    /// An entry pending this long is taken over by another consumer
    /// (a running handler's entry is kept from it by reports in
    /// progress). `None` (the default): the consumer's lease, so that a
    /// frozen consumer's entry is taken over about when its claim expires.
    pub min_idle: Option<Duration>,
    /// Entries read at once, and handlers at once.
    pub batch: usize,
    /// Where dead letters go (`None`: `<stream>:dead`).
    pub dead_letter_stream: Option<String>,
    /// Until when, draining how long, reconnecting how.
    pub running: Running,
}

impl Default for StreamOptions {
    /// The group `idem`, this consumer `idem-<pid>`, entries idle for the
    /// consumer's lease taken over, 16 at once, dead letters to
    /// `<stream>:dead`, until the process ends.
    fn default() -> Self {
        Self {
            group: "idem".to_owned(),
            consumer: format!("idem-{}", std::process::id()),
            min_idle: None,
            batch: 16,
            dead_letter_stream: None,
            running: Running::default(),
        }
    }
}

impl StreamOptions {
    /// The consumer group.
    #[must_use]
    pub fn group(mut self, group: &str) -> Self {
        group.clone_into(&mut self.group);
        self
    }

    /// This consumer's name in the group (unique per process).
    #[must_use]
    pub fn consumer(mut self, name: &str) -> Self {
        name.clone_into(&mut self.consumer);
        self
    }

    /// How long an entry stays pending before another consumer takes it
    /// over, in place of the consumer's lease.
    #[must_use]
    pub fn min_idle(mut self, min_idle: Duration) -> Self {
        self.min_idle = Some(min_idle);
        self
    }

    /// Entries read (and handlers) at once.
    #[must_use]
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch;
        self
    }

    /// Dead letters to `stream` instead of `<stream>:dead`.
    #[must_use]
    pub fn dead_letter_stream(mut self, stream: &str) -> Self {
        self.dead_letter_stream = Some(stream.to_owned());
        self
    }

    /// Until when, draining how long, reconnecting how.
    #[must_use]
    pub fn running(mut self, running: Running) -> Self {
        self.running = running;
        self
    }
}

/// Where a delivery's entry lives, shared by a batch's deliveries.
struct Place {
    connection: MultiplexedConnection,
    stream: String,
    group: String,
    consumer: String,
    min_idle: Duration,
    dead_letters: String,
}

/// One stream entry delivered to this consumer.
pub struct StreamDelivery {
    message: Message,
    entry: String,
    place: Arc<Place>,
}

fn broker(what: &'static str) -> impl FnOnce(redis::RedisError) -> BrokerError {
    move |e| BrokerError::new(format!("redis stream {what}"), e)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl StreamDelivery {
    /// `XCLAIM` of this entry to this consumer with its idle time set to
    /// `idle`, not counted as a delivery.
    async fn set_idle(&self, idle: Duration) -> Result<(), BrokerError> {
        let p = &self.place;
        let _: Value = redis::cmd("XCLAIM")
            .arg(&p.stream)
            .arg(&p.group)
            .arg(&p.consumer)
            .arg(0)
            .arg(&self.entry)
            .arg("IDLE")
            .arg(millis(idle))
            .arg("JUSTID")
            .query_async(&mut p.connection.clone())
            .await
            .map_err(broker("XCLAIM"))?;
        Ok(())
    }
}

impl Delivery for StreamDelivery {
    fn message(&self) -> &Message {
        &self.message
    }

    async fn in_progress(&self) {
        if let Err(e) = self.set_idle(Duration::ZERO).await {
            tracing::debug!(target: "idem", error = %e, "redis stream: the in-progress claim failed");
        }
    }

    async fn settle(self, verdict: &Verdict) -> Result<(), BrokerError> {
        let p = &self.place;
        let mut connection = p.connection.clone();
        match &verdict.action {
            Action::Ack => {
                let _: u64 = redis::cmd("XACK")
                    .arg(&p.stream)
                    .arg(&p.group)
                    .arg(&self.entry)
                    .query_async(&mut connection)
                    .await
                    .map_err(broker("XACK"))?;
                Ok(())
            }
            Action::Redeliver { after } => self.set_idle(p.min_idle.saturating_sub(*after)).await,
            Action::DeadLetter { reason } => {
                let mut add = redis::cmd("XADD");
                add.arg(&p.dead_letters)
                    .arg("*")
                    .arg("payload")
                    .arg(self.message.payload.as_ref())
                    .arg(crate::DEAD_LETTER_REASON)
                    .arg(reason)
                    .arg(crate::DEAD_LETTER_SOURCE)
                    .arg(&p.stream)
                    .arg("idem-entry")
                    .arg(&self.entry);
                if let Some(id) = &self.message.id {
                    add.arg("id").arg(id);
                }
                let mut ack = redis::cmd("XACK");
                ack.arg(&p.stream).arg(&p.group).arg(&self.entry);
                let _: Value = redis::pipe()
                    .atomic()
                    .add_command(add)
                    .ignore()
                    .add_command(ack)
                    .ignore()
                    .query_async(&mut connection)
                    .await
                    .map_err(broker("dead-letter"))?;
                Ok(())
            }
        }
    }
}

/// Consumes `stream` on the Redis of `client` with `consumer`, in
/// `options.group`, until `options.running`'s shutdown: first the entries
/// pending longer than `min_idle` (taken over), then new ones, `batch` at a
/// time, each batch run by [`Consumer::handle_batch`].
///
/// A lost connection (a Redis restart, a failover) is made again with the
/// backoff, and logged; the entries it left pending are taken over after
/// `min_idle`. On shutdown it stops reading, lets the running batch finish
/// within the drain and returns `Ok`. It returns an error only when Redis
/// refuses what connecting again cannot fix (credentials, a key of another
/// type under the stream's name).
pub async fn consume<H: Handler>(
    consumer: Arc<Consumer<H>>,
    client: redis::Client,
    stream: &str,
    options: StreamOptions,
) -> Result<(), BrokerError> {
    supervise("redis stream", &options.running, || {
        session(&consumer, &client, stream, &options)
    })
    .await
}

/// Wrong credentials, or a key of another type, end for good; anything
/// else is connected again.
fn ended(what: &'static str) -> impl FnOnce(redis::RedisError) -> Ended {
    move |e| {
        let refused = e.kind() == redis::ErrorKind::AuthenticationFailed
            || matches!(
                e.code(),
                Some("WRONGTYPE" | "NOAUTH" | "WRONGPASS" | "NOPERM")
            );
        let e = broker(what)(e);
        if refused {
            Ended::Refused(e)
        } else {
            Ended::Lost(e)
        }
    }
}

/// One connection's consumption, until it is lost or shutdown drains it.
async fn session<H: Handler>(
    consumer: &Arc<Consumer<H>>,
    client: &redis::Client,
    stream: &str,
    options: &StreamOptions,
) -> Ended {
    let setup = async {
        let mut reads = client
            .get_multiplexed_async_connection()
            .await
            .map_err(ended("connect"))?;
        let settles = client
            .get_multiplexed_async_connection()
            .await
            .map_err(ended("connect"))?;
        let created: redis::RedisResult<Value> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(stream)
            .arg(&options.group)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut reads)
            .await;
        if let Err(e) = created {
            if e.code() != Some("BUSYGROUP") {
                return Err(ended("XGROUP CREATE")(e));
            }
        }
        Ok((reads, settles))
    };
    let (mut reads, settles) = match setup.await {
        Ok(connections) => connections,
        Err(ended) => return ended,
    };
    tracing::info!(target: "idem", stream, group = %options.group, "redis stream: consuming");
    let place = Arc::new(Place {
        connection: settles,
        stream: stream.to_owned(),
        group: options.group.clone(),
        consumer: options.consumer.clone(),
        min_idle: options
            .min_idle
            .unwrap_or_else(|| consumer.engine().policy().lease_value()),
        dead_letters: options
            .dead_letter_stream
            .clone()
            .unwrap_or_else(|| format!("{stream}:dead")),
    });
    let batch = options.batch.max(1);
    let shutdown = &options.running.shutdown;
    loop {
        let read = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ended::Shutdown,
            read = read_batch(&mut reads, &place, batch) => read,
        };
        let deliveries = match read {
            Ok(deliveries) => deliveries,
            Err(e) => return Ended::Lost(e),
        };
        if deliveries.is_empty() {
            continue;
        }
        let handled = consumer.handle_batch(
            deliveries,
            BatchOptions {
                parallelism: batch,
                group_by: None,
            },
        );
        // On shutdown, the batch gets the drain to finish; what is still
        // running then stays pending, taken over after `min_idle`.
        let Some(report) = options.running.within_drain(handled).await else {
            tracing::warn!(target: "idem", drain = ?options.running.drain, "shutdown: a batch still running past the drain is left; its entries stay pending");
            return Ended::Shutdown;
        };
        for failed in report.items.iter().filter_map(|i| i.as_ref().err()) {
            tracing::warn!(target: "idem", error = %failed, "redis stream: the verdict could not be told; the entry stays pending");
        }
    }
}

/// The next entries for this consumer: those pending past `min_idle`
/// (taken over) first, else new ones (waiting up to 100 ms for them).
async fn read_batch(
    reads: &mut MultiplexedConnection,
    place: &Arc<Place>,
    batch: usize,
) -> Result<Vec<StreamDelivery>, BrokerError> {
    let mut deliveries = take_over(reads, place, batch).await?;
    if !deliveries.is_empty() {
        return Ok(deliveries);
    }
    let read: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(&place.group)
        .arg(&place.consumer)
        .arg("COUNT")
        .arg(batch)
        .arg("BLOCK")
        .arg(100)
        .arg("STREAMS")
        .arg(&place.stream)
        .arg(">")
        .query_async(reads)
        .await
        .map_err(broker("XREADGROUP"))?;
    if let Value::Array(streams) = &read {
        for s in streams {
            if let Value::Array(parts) = s {
                for (entry, fields) in parts.get(1).map(entries).unwrap_or_default() {
                    deliveries.push(StreamDelivery {
                        message: message_of(&fields, 1),
                        entry,
                        place: Arc::clone(place),
                    });
                }
            }
        }
    }
    Ok(deliveries)
}

/// Entries of the group pending longer than `min_idle`, claimed by this
/// consumer, with their delivery counts.
async fn take_over(
    connection: &mut MultiplexedConnection,
    place: &Arc<Place>,
    count: usize,
) -> Result<Vec<StreamDelivery>, BrokerError> {
    let pending: StreamPendingCountReply = redis::cmd("XPENDING")
        .arg(&place.stream)
        .arg(&place.group)
        .arg("IDLE")
        .arg(millis(place.min_idle))
        .arg("-")
        .arg("+")
        .arg(count)
        .query_async(connection)
        .await
        .map_err(broker("XPENDING"))?;
    let counts: Vec<(String, u32)> = pending
        .ids
        .into_iter()
        .map(|p| (p.id, u32::try_from(p.times_delivered).unwrap_or(u32::MAX)))
        .collect();
    if counts.is_empty() {
        return Ok(Vec::new());
    }
    let mut claim = redis::cmd("XCLAIM");
    claim
        .arg(&place.stream)
        .arg(&place.group)
        .arg(&place.consumer)
        .arg(millis(place.min_idle));
    for (id, _) in &counts {
        claim.arg(id);
    }
    let claimed: Value = claim
        .query_async(connection)
        .await
        .map_err(broker("XCLAIM"))?;
    Ok(entries(&claimed)
        .into_iter()
        .map(|(entry, fields)| {
            let before = counts
                .iter()
                .find(|(id, _)| *id == entry)
                .map_or(1, |(_, n)| *n);
            StreamDelivery {
                message: message_of(&fields, before.saturating_add(1)),
                entry,
                place: Arc::clone(place),
            }
        })
        .collect())
}
