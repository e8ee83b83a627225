//! Batches: many deliveries handled with a bound on parallelism, each with
//! its own verdict, reported as partial failures; optionally in order per
//! group (a FIFO message group), where a failure holds back only the rest
//! of its group. A message delivered twice in one batch runs once. Their
//! claims and completions are asked for together, so a store that batches
//! them (`idem_redis::RedisStore::with_batching`) sends a batch's claims in
//! one call and its completions in another.

use futures_util::stream::{self, StreamExt as _};

use idem_core::RecordId;

use crate::consumer::{Consumer, Prepared};
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::message::Message;
use crate::verdict::{Action, Handled, Verdict};

/// Hands `batch` (the deliveries a broker had ready) to a task of
/// `running`, run as one batch, each delivery settled as soon as its
/// verdict is known; a verdict `broker` could not be told is logged, and
/// its message stays with the broker, to be delivered again.
#[cfg(any(feature = "nats", feature = "rabbitmq"))]
pub(crate) fn spawn_batch<H: Handler, D: Delivery + 'static>(
    running: &mut tokio::task::JoinSet<()>,
    consumer: &std::sync::Arc<Consumer<H>>,
    batch: Vec<D>,
    broker: &'static str,
) {
    if batch.is_empty() {
        return;
    }
    let consumer = std::sync::Arc::clone(consumer);
    running.spawn(async move {
        let options = BatchOptions {
            parallelism: batch.len(),
            group_by: None,
        };
        let report = consumer.handle_batch(batch, options).await;
        for failed in report.items.iter().filter_map(|i| i.as_ref().err()) {
            tracing::warn!(target: "idem", broker, error = %failed, "the verdict could not be told; the message stays with the broker, to be delivered again");
        }
    });
}

/// What puts deliveries of a batch in one run, handled in order.
#[derive(PartialEq)]
enum RunOf {
    /// [`BatchOptions::group_by`]'s group.
    Group(String),
    /// The same record: a message delivered twice in one batch runs once,
    /// and its second delivery is answered from the first one's record.
    Key(RecordId),
}

/// Deliveries handled one after another: each with its place in the
/// batch and its call.
type Run<D, I> = Vec<(usize, D, Prepared<I>)>;

/// How a batch is run.
#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    /// At most this many handlers run at once (at least 1).
    pub parallelism: usize,
    /// Keeps order within groups: deliveries with the same group key run one
    /// after another in batch order, and after one that is not settled
    /// (redelivered), the rest of its group is not run but redelivered too.
    /// Deliveries without a group key run as if ungrouped, except that
    /// deliveries of one message key always run one after another: the
    /// first runs, and a repeat is answered from its record (acknowledged
    /// at once, never run twice nor sent back to wait for the first).
    pub group_by: Option<fn(&Message) -> Option<String>>,
}

impl Default for BatchOptions {
    /// 8 at once, no groups.
    fn default() -> Self {
        Self {
            parallelism: 8,
            group_by: None,
        }
    }
}

/// Each delivery's verdict, in batch order.
#[derive(Debug)]
pub struct BatchReport {
    /// One per delivery, in the order given: the verdict, or the broker
    /// error that kept it from being told (the message stays
    /// unacknowledged).
    pub items: Vec<Result<Verdict, BrokerError>>,
}

impl BatchReport {
    /// The positions (from 0) of the deliveries that are not settled: to be
    /// delivered again (AWS Lambda's `batchItemFailures`).
    pub fn failures(&self) -> Vec<usize> {
        self.items
            .iter()
            .enumerate()
            .filter(|(_, item)| !matches!(item, Ok(v) if v.is_settled()))
            .map(|(i, _)| i)
            .collect()
    }
}

impl<H: Handler> Consumer<H> {
    /// Handles `deliveries` as `options` say, each settled with its broker
    /// as soon as its verdict is known.
    pub async fn handle_batch<D: Delivery>(
        &self,
        deliveries: Vec<D>,
        options: BatchOptions,
    ) -> BatchReport {
        let n = deliveries.len();
        let parallelism = options.parallelism.max(1);
        // Runs: a group's deliveries in order, the deliveries of one key in
        // order (the first runs, the others are answered from its record),
        // or one delivery alone.
        let mut runs: Vec<Run<D, H::Input>> = Vec::new();
        let mut groups: Vec<(RunOf, usize)> = Vec::new();
        for (i, delivery) in deliveries.into_iter().enumerate() {
            let prepared = self.call(&delivery);
            let run_of = match options.group_by.and_then(|by| by(delivery.message())) {
                Some(group) => Some(RunOf::Group(group)),
                None => prepared
                    .as_ref()
                    .ok()
                    .map(|(call, _)| RunOf::Key(*call.record_id())),
            };
            let Some(run_of) = run_of else {
                runs.push(vec![(i, delivery, prepared)]);
                continue;
            };
            if let Some((_, run)) = groups.iter().find(|(of, _)| *of == run_of) {
                runs[*run].push((i, delivery, prepared));
            } else {
                groups.push((run_of, runs.len()));
                runs.push(vec![(i, delivery, prepared)]);
            }
        }
        // One batch for the store: the claims and completions asked for at
        // once go together where the store can send them so.
        let done: Vec<Vec<(usize, Result<Verdict, BrokerError>)>> = idem_core::adapter::in_batch(
            stream::iter(runs)
                .map(|run| self.handle_in_order(run))
                .buffer_unordered(parallelism)
                .collect(),
        )
        .await;
        let mut items: Vec<Option<Result<Verdict, BrokerError>>> = (0..n).map(|_| None).collect();
        for (i, item) in done.into_iter().flatten() {
            items[i] = Some(item);
        }
        BatchReport {
            items: items
                .into_iter()
                .map(|item| item.unwrap_or_else(|| Err(BrokerError::new("batch", "not handled"))))
                .collect(),
        }
    }

    /// A group's deliveries one after another; after one that is not
    /// settled, the rest are redelivered without running.
    async fn handle_in_order<D: Delivery>(
        &self,
        run: Run<D, H::Input>,
    ) -> Vec<(usize, Result<Verdict, BrokerError>)> {
        let mut out = Vec::with_capacity(run.len());
        let mut held_back: Option<std::time::Duration> = None;
        for (i, delivery, prepared) in run {
            let result = match held_back {
                None => self.handle_prepared(delivery, prepared).await,
                Some(after) => {
                    let verdict = Verdict {
                        handled: Handled::FailedTransient(
                            "held back behind an earlier message of its group".to_owned(),
                        ),
                        action: Action::Redeliver { after },
                    };
                    delivery.settle(&verdict).await.map(|()| verdict)
                }
            };
            if held_back.is_none() {
                held_back = match &result {
                    Ok(Verdict {
                        action: Action::Redeliver { after },
                        ..
                    }) => Some(*after),
                    Ok(_) => None,
                    Err(_) => Some(std::time::Duration::from_millis(200)),
                };
            }
            out.push((i, result));
        }
        out
    }
}
