//! `Consumer`: the pipeline from a delivered message to a broker action,
//! written once for every broker.

use std::future::Future as _;
use std::panic::AssertUnwindSafe;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt as _;
use idem_core::{
    Call, Engine, Error, Failure, Fingerprint, IdempotencyKey, IgnoredFields, Ran, RunReport, Scope,
};

use crate::backoff::Backoff;
use crate::delivery::{BrokerError, Delivery};
use crate::handler::Handler;
use crate::key_source::KeySource;
use crate::message::Message;
use crate::verdict::{Action, Handled, Verdict};

/// Runs a [`Handler`] for each delivered message under idem's engine, and
/// says what the broker must do with the message:
///
/// | outcome | action |
/// | --- | --- |
/// | executed (result recorded), replayed, or a final failure recorded | ack |
/// | executed, but the record is not stored yet (the store went away) | redeliver after a backoff, until a delivery finds the record |
/// | transient failure (claim released) | redeliver after a backoff |
/// | transient failure on the last delivery allowed | dead-letter with the error |
/// | in flight at another consumer | redeliver after the backoff, at most the holder's lease's time left; never acked while its holder may still die |
/// | key reused with another payload | dead-letter with the reason; never run |
/// | no key, not JSON, not the handler's input | dead-letter with the reason; never run |
/// | store unreachable or full | held, reported in progress, and claimed again with the backoff while the store is down (up to [`hold_while_store_down`](Consumer::hold_while_store_down)), then redelivered after a backoff; never dead-lettered, and an outage does not bring the message closer to its cap |
/// | the handler panicked | redeliver after the lease: the outcome is unknown, and the claim stays to its lease |
/// | its claim was lost while the handler ran (another delivery took it over) | redeliver after a backoff: the delivery that took it over records, and its record answers |
///
/// A message is acknowledged only once its outcome is stored, so a consumer
/// that dies at any point leaves the message to be delivered again, and the
/// redelivery is answered from the record if the handler got that far.
pub struct Consumer<H> {
    engine: Engine,
    scope: Scope,
    operation: String,
    key: KeySource,
    ignored: IgnoredFields,
    handler: H,
    max_deliveries: u32,
    backoff: Backoff,
    progress_every: Duration,
    hold: Duration,
}

/// A delivery's call and the handler's input, or why it has none (it is
/// dead-lettered without running).
pub(crate) type Prepared<I> = Result<(Call, I), String>;

/// The default number of deliveries after which a message that keeps
/// failing transiently is dead-lettered.
pub const DEFAULT_MAX_DELIVERIES: u32 = 10;

/// How long a delivery is held by default while the store does not answer
/// its claim: 20 minutes, under RabbitMQ's default delivery acknowledgement
/// timeout (30 minutes), past which the broker closes the channel.
pub const DEFAULT_HOLD_WHILE_STORE_DOWN: Duration = Duration::from_mins(20);

impl<H: Handler> Consumer<H> {
    /// A consumer of `operation`'s messages, keyed by their message id, in
    /// the scope named after the operation.
    pub fn new(engine: Engine, operation: impl Into<String>, handler: H) -> Self {
        let operation = operation.into();
        let progress_every = engine.policy().lease_value() / 3;
        Self {
            engine,
            scope: Scope::new(operation.clone()),
            operation,
            key: KeySource::MessageId,
            ignored: IgnoredFields::NONE,
            handler,
            max_deliveries: DEFAULT_MAX_DELIVERIES,
            backoff: Backoff::default(),
            progress_every,
            hold: DEFAULT_HOLD_WHILE_STORE_DOWN,
        }
    }

    /// Takes each message's key from `key` (default: the message id).
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Fields of the payload that do not make a redelivery or a resend
    /// another message (a producer's `sent_at`, a trace id): the
    /// fingerprint leaves them out, so a resend under the same key that
    /// changed only these is answered from the record rather than
    /// dead-lettered as a reused key. The handler still gets them.
    ///
    /// ```
    /// # use idem_queue::{Consumer, Handler};
    /// # fn with(consumer: Consumer<impl Handler>) -> Result<(), idem_core::IgnoredFieldError> {
    /// use idem_core::IgnoredFields;
    /// let consumer = consumer.ignore_fields(IgnoredFields::new(["/sent_at", "/meta/trace"])?);
    /// # let _ = consumer; Ok(()) }
    /// ```
    #[must_use]
    pub fn ignore_fields(mut self, fields: IgnoredFields) -> Self {
        self.ignored = fields;
        self
    }

    /// Namespaces the keys (default: the operation's name).
    #[must_use]
    pub fn scope(mut self, scope: impl Into<Scope>) -> Self {
        self.scope = scope.into();
        self
    }

    /// Dead-letters a message that failed transiently on its
    /// `max_deliveries`-th delivery (default 10). The count is the broker's:
    /// it includes the redeliveries of a duplicate that waited for its
    /// holder, which are never dead-lettered themselves but bring the cap
    /// closer. A store outage does not: a delivery that meets the store
    /// down is held while it lasts ([`hold_while_store_down`](Self::hold_while_store_down)),
    /// so it counts one delivery however long the outage, up to the hold.
    #[must_use]
    pub fn max_deliveries(mut self, max_deliveries: u32) -> Self {
        self.max_deliveries = max_deliveries.max(1);
        self
    }

    /// The delays between deliveries (default 200 ms doubling to 30 s).
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long a delivery that meets the store down is held (default
    /// [`DEFAULT_HOLD_WHILE_STORE_DOWN`], 20 minutes): reported in progress
    /// to its broker, its claim tried again with the backoff, so that an
    /// outage neither redelivers every message over and over nor brings
    /// them closer to their dead-letter cap. The consumer slows down with
    /// the store and takes no new work it cannot claim. Past the hold, the
    /// delivery is redelivered after a backoff (one delivery more). Keep it
    /// under the broker's own deadline for an unacknowledged delivery
    /// where reports in progress do not extend it (RabbitMQ's
    /// `consumer_timeout`, 30 minutes by default); `Duration::ZERO`
    /// redelivers at once.
    #[must_use]
    pub fn hold_while_store_down(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// How often a running handler's delivery is reported in progress
    /// (default: a third of the engine's lease).
    #[must_use]
    pub fn progress_every(mut self, every: Duration) -> Self {
        self.progress_every = every.max(Duration::from_millis(10));
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The delivery after which a message that keeps failing is
    /// dead-lettered ([`Consumer::max_deliveries`]).
    #[must_use]
    pub fn max_deliveries_value(&self) -> u32 {
        self.max_deliveries
    }

    /// Decides `delivery`'s verdict and tells its broker. A broker that
    /// cannot be told leaves the message unacknowledged, to be delivered
    /// again.
    pub async fn handle<D: Delivery>(&self, delivery: D) -> Result<Verdict, BrokerError> {
        let prepared = self.call(&delivery);
        self.handle_prepared(delivery, prepared).await
    }

    /// [`handle`](Self::handle) with the delivery's call read already.
    pub(crate) async fn handle_prepared<D: Delivery>(
        &self,
        delivery: D,
        prepared: Prepared<H::Input>,
    ) -> Result<Verdict, BrokerError> {
        let verdict = self.decide_prepared(&delivery, prepared).await;
        tracing::debug!(target: "idem", operation = %self.operation, id = ?delivery.message().id, verdict = %verdict, "delivery settled");
        delivery.settle(&verdict).await?;
        Ok(verdict)
    }

    /// The verdict on `delivery`, its handler run if it must be; the
    /// delivery is reported in progress while the handler runs.
    pub async fn decide<D: Delivery>(&self, delivery: &D) -> Verdict {
        let prepared = self.call(delivery);
        self.decide_prepared(delivery, prepared).await
    }

    async fn decide_prepared<D: Delivery>(
        &self,
        delivery: &D,
        prepared: Prepared<H::Input>,
    ) -> Verdict {
        let run = AssertUnwindSafe(self.run(delivery, prepared)).catch_unwind();
        tokio::pin!(run);
        // Most handlers on a store that answers at once finish at their
        // first poll: no timer for them.
        let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
        let ran = match first {
            Poll::Ready(ran) => ran,
            Poll::Pending => {
                let mut progress = tokio::time::interval_at(
                    tokio::time::Instant::now() + self.progress_every,
                    self.progress_every,
                );
                loop {
                    tokio::select! {
                        ran = &mut run => break ran,
                        _ = progress.tick() => delivery.in_progress().await,
                    }
                }
            }
        };
        ran.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            tracing::error!(target: "idem", operation = %self.operation, panic = %what, "the handler panicked; its outcome is unknown and its claim is kept to its lease");
            self.unknown(format!("the handler panicked: {what}"))
        })
    }

    /// Runs the handler for `message` under the engine, and maps what
    /// happened to a verdict. While the store does not answer the claim
    /// (nothing has run), the delivery is held and claimed again.
    async fn run<D: Delivery>(&self, delivery: &D, prepared: Prepared<H::Input>) -> Verdict {
        let message = delivery.message();
        let (mut call, mut input) = match prepared {
            Ok(prepared) => prepared,
            Err(why) => return dead(Handled::Malformed(why.clone()), why),
        };
        let held = tokio::time::Instant::now();
        let mut tries = 0;
        loop {
            let RunReport {
                result: ran,
                recorded,
                ..
            } = self
                .engine
                .run_reported(&call, |c| self.handler.handle(input, c))
                .await;
            let left = self.hold.saturating_sub(held.elapsed());
            // Nothing ran: the store did not answer, or this process runs
            // as much as it may (`Engine::with_max_in_flight`).
            let refused = match &ran {
                Err(Error::Store(e)) if e.is_transient() => Some(e.to_string()),
                Err(e @ Error::Overloaded { .. }) => Some(e.to_string()),
                _ => None,
            };
            if let Some(e) = refused {
                if !left.is_zero() {
                    tries += 1;
                    let pause = self.backoff.after(tries).min(left);
                    if tries == 1 {
                        tracing::warn!(target: "idem", operation = %self.operation, id = ?message.id, error = %e, "the claim was refused for now; the delivery is held and claimed again");
                    }
                    tokio::time::sleep(pause).await;
                    // Nothing ran: the input is read again from the message.
                    (call, input) = match self.call(delivery) {
                        Ok(prepared) => prepared,
                        Err(why) => return dead(Handled::Malformed(why.clone()), why),
                    };
                    continue;
                }
            }
            match &ran {
                _ if tries == 0 => {}
                Err(Error::Store(e)) => {
                    tracing::warn!(target: "idem", operation = %self.operation, id = ?message.id, held = ?held.elapsed(), error = %e, "the store stayed down past the hold; the delivery is redelivered");
                }
                _ => {
                    tracing::info!(target: "idem", operation = %self.operation, id = ?message.id, held = ?held.elapsed(), "the store answered the held delivery's claim again");
                }
            }
            return self.verdict(message, ran, recorded);
        }
    }

    /// The call for `delivery`'s message and the handler's input, or why it
    /// has none; its lease within the delivery's bound, if it has one.
    pub(crate) fn call<D: Delivery>(&self, delivery: &D) -> Prepared<H::Input> {
        let (call, input) = self.call_of(delivery.message())?;
        let Some(within) = delivery.lease_within() else {
            return Ok((call, input));
        };
        let lease = self
            .engine
            .policy()
            .lease_value()
            .min(within)
            .max(Duration::from_millis(1));
        Ok((call.lease(lease), input))
    }

    /// The call for `message` and the handler's input, or why it has none.
    fn call_of(&self, message: &Message) -> Prepared<H::Input> {
        let payload: serde_json::Value = serde_json::from_slice(&message.payload)
            .map_err(|e| format!("the payload is not JSON: {e}"))?;
        let key = self.key.key_of(message, &payload)?;
        let key = IdempotencyKey::parse(&key)
            .map_err(|e| format!("the message's key is not a valid idempotency key: {e}"))?;
        let fingerprint = Fingerprint::of_without(&self.operation, &payload, &self.ignored);
        let input = <H::Input as serde::Deserialize>::deserialize(&payload)
            .map_err(|e| format!("the payload is not this handler's input: {e}"))?;
        let call =
            Call::new(self.scope.clone(), key, fingerprint).with_operation(self.operation.clone());
        Ok((call, input))
    }

    fn verdict(
        &self,
        message: &Message,
        ran: Result<Ran<H::Output>, Error<H::Error>>,
        recorded: bool,
    ) -> Verdict {
        let backoff = self.backoff.after(message.deliveries);
        let later = |handled| Verdict {
            handled,
            action: Action::Redeliver { after: backoff },
        };
        let ack = |handled| Verdict {
            handled,
            action: Action::Ack,
        };
        match ran {
            Ok(Ran::Executed(_)) if recorded => ack(Handled::Executed),
            Ok(Ran::Executed(_)) => later(Handled::RecordPending),
            Ok(Ran::Replayed(_)) => ack(Handled::Replayed),
            Err(Error::Failed(Ran::Replayed(e))) => ack(Handled::FailedFinal(e.to_string())),
            Err(Error::Failed(Ran::Executed(e))) if e.is_final() && recorded => {
                ack(Handled::FailedFinal(e.to_string()))
            }
            Err(Error::Failed(Ran::Executed(e))) if e.is_final() => later(Handled::RecordPending),
            Err(Error::Failed(Ran::Executed(e))) if message.deliveries >= self.max_deliveries => {
                let reason = format!(
                    "failed on each of {} deliveries; the last error: {e}",
                    message.deliveries
                );
                dead(Handled::Poisoned(e.to_string()), reason)
            }
            Err(Error::Failed(Ran::Executed(e))) => later(Handled::FailedTransient(e.to_string())),
            // Looked at again with the backoff, and no later than the
            // holder's lease ends: soon after the holder records, its
            // record answers.
            Err(Error::InFlight { retry_after }) => Verdict {
                handled: Handled::InFlight,
                action: Action::Redeliver {
                    after: self.backoff.bounded(retry_after.min(backoff)),
                },
            },
            Err(Error::Mismatch) => dead(
                Handled::KeyReused,
                "the message's key was used before for another payload; it was not run".to_owned(),
            ),
            // It ran before: done with, though its result is gone.
            Err(Error::Expired) => ack(Handled::Expired),
            Err(Error::Store(e)) => later(Handled::StoreUnavailable(e.to_string())),
            Err(Error::LeaseLost) => {
                // Another delivery took the claim over; its record answers
                // the next delivery.
                later(Handled::Unknown(
                    "the claim was lost while the handler ran".to_owned(),
                ))
            }
            // Written by a newer version mid-rollout: an upgraded consumer
            // reads it.
            Err(Error::Codec(e)) if e.is_newer_format() => later(Handled::Unknown(e.to_string())),
            Err(Error::Codec(e)) => dead(
                Handled::Unknown(e.to_string()),
                format!("the handler's result cannot be recorded or read back: {e}"),
            ),
            Err(Error::InvalidKey(e)) => {
                let why = format!("the message's key is not a valid idempotency key: {e}");
                dead(Handled::Malformed(why.clone()), why)
            }
            Err(Error::Fingerprint(e)) => {
                let why = format!("the payload cannot be fingerprinted: {e}");
                dead(Handled::Malformed(why.clone()), why)
            }
            // A kind of error this version does not know: not acked.
            Err(other) => later(Handled::Unknown(other.to_string())),
        }
    }

    /// A handler that panicked: its claim stays to its lease, and the
    /// message comes back once the lease is over.
    fn unknown(&self, why: String) -> Verdict {
        Verdict {
            handled: Handled::Unknown(why),
            action: Action::Redeliver {
                after: self.engine.policy().lease_value(),
            },
        }
    }
}

fn dead(handled: Handled, reason: String) -> Verdict {
    Verdict {
        handled,
        action: Action::DeadLetter { reason },
    }
}
