//! The consumer pipeline, broker-neutral: each outcome of a delivery and
//! the action the broker is told, on the memory store (and a store that is
//! down), with deliveries that record what they were told.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_core::StoreError;
use idem_core::{Claim, Engine, Failure, IgnoredFields, MemoryStore, Policy};
use idem_queue::{
    handler_fn, Action, Backoff, BatchOptions, Consumer, Handled, Handler, KeySource, Message,
    Verdict,
};
use idem_tests::{DownStore, Hooked, Hooks, Told, Transition};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    order_id: String,
    sku: String,
}

#[derive(Debug, Serialize, Deserialize, thiserror::Error)]
enum ShipError {
    #[error("the carrier is unavailable")]
    CarrierDown,
    #[error("out of stock")]
    OutOfStock,
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        matches!(self, Self::OutOfStock)
    }
}

/// A consumer shipping orders (keyed by `order_id`), counting shipments;
/// `carrier-down` fails transiently, `out-of-stock` for good, `panic`
/// panics, `slow` takes 300 ms.
fn shipper(engine: Engine, shipped: Arc<AtomicUsize>) -> Consumer<impl Handler> {
    let handler = handler_fn(move |order: Order, _claim: Claim| {
        let shipped = Arc::clone(&shipped);
        async move {
            match order.sku.as_str() {
                "carrier-down" => return Err(ShipError::CarrierDown),
                "out-of-stock" => return Err(ShipError::OutOfStock),
                "panic" => panic!("the label printer caught fire"),
                "slow" => tokio::time::sleep(Duration::from_millis(300)).await,
                _ => {}
            }
            shipped.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ShipError>(format!("shipment of {}", order.order_id))
        }
    });
    Consumer::new(engine, "ship-order", handler)
        .key(KeySource::Field("/order_id".into()))
        .max_deliveries(3)
        .backoff(Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(5),
        })
}

fn order(id: &str, sku: &str) -> Message {
    Message::new(format!(r#"{{"order_id":"{id}","sku":"{sku}"}}"#))
}

async fn tell<H: Handler>(consumer: &Consumer<H>, message: Message) -> (Verdict, Action) {
    let told = Arc::new(Mutex::new(Vec::new()));
    let verdict = consumer
        .handle(Told {
            message,
            told: Arc::clone(&told),
        })
        .await
        .expect("told");
    let action = told.lock().unwrap_or_else(PoisonError::into_inner)[0]
        .action
        .clone();
    assert_eq!(
        action, verdict.action,
        "the broker is told the verdict's action"
    );
    (verdict, action)
}

#[tokio::test]
async fn an_order_delivered_twice_ships_once_and_both_deliveries_are_acked() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::clone(&shipped));
    let (first, _) = tell(&consumer, order("o-1", "tea")).await;
    let (again, _) = tell(&consumer, order("o-1", "tea").delivered(2)).await;
    assert_eq!(
        (first.handled, first.action),
        (Handled::Executed, Action::Ack)
    );
    assert_eq!(
        (again.handled, again.action),
        (Handled::Replayed, Action::Ack)
    );
    assert_eq!(shipped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_order_redelivered_a_day_later_is_acked_and_not_shipped_again() {
    let clock = Arc::new(idem_core::memory::ManualClock::new(1_700_000_000_000_000));
    let store = MemoryStore::builder().clock(Arc::clone(&clock)).build();
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(store), Arc::clone(&shipped));
    tell(&consumer, order("o-late", "tea")).await;
    // A stream replayed from its start, a day and a minute on: the record
    // (kept a day) has expired, its trace has not.
    clock.advance(Duration::from_hours(24) + Duration::from_mins(1));
    let (late, action) = tell(&consumer, order("o-late", "tea").delivered(2)).await;
    assert_eq!((late.handled, action), (Handled::Expired, Action::Ack));
    assert_eq!(shipped.load(Ordering::SeqCst), 1, "shipped once");
}

#[tokio::test]
async fn an_order_id_reused_for_another_order_is_dead_lettered_and_never_run() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::clone(&shipped));
    tell(&consumer, order("o-1", "tea")).await;
    let (reused, action) = tell(&consumer, order("o-1", "coffee")).await;
    assert_eq!(reused.handled, Handled::KeyReused);
    assert!(matches!(action, Action::DeadLetter { reason } if reason.contains("another payload")));
    assert_eq!(shipped.load(Ordering::SeqCst), 1);
}

/// Hooks under which the store refuses the first `n` completions (it went
/// away just as the handler finished), and forwards everything else.
struct CompletionsRefused(AtomicUsize);

impl Hooks for CompletionsRefused {
    async fn around<T: Send>(
        &self,
        transition: Transition<'_>,
        forward: impl std::future::Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        let refuse = matches!(transition, Transition::Complete(..))
            && self
                .0
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if refuse {
            return Err(StoreError::unavailable(
                "complete: cannot reach the store",
                std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"),
            ));
        }
        forward.await
    }
}

#[tokio::test]
async fn an_order_shipped_while_the_store_went_away_is_not_acked_until_its_record_is_stored() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let store = Hooked::new(
        Arc::new(MemoryStore::new()),
        // The engine tries four times within the call, then in the background.
        CompletionsRefused(AtomicUsize::new(6)),
    );
    let engine = Engine::new(store).with_policy(Policy::default().lease(Duration::from_secs(2)));
    let consumer = shipper(engine, Arc::clone(&shipped));
    let (first, action) = tell(&consumer, order("o-late-record", "tea")).await;
    assert_eq!(first.handled, Handled::RecordPending, "{first:?}");
    assert!(
        matches!(action, Action::Redeliver { .. }),
        "never acked: {action:?}"
    );
    // The engine records it in the background; a redelivery is answered
    // from the record once it is there (in flight until then).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let again = loop {
        let (again, _) = tell(&consumer, order("o-late-record", "tea").delivered(2)).await;
        if again.handled != Handled::InFlight || tokio::time::Instant::now() > deadline {
            break again;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (again.handled, again.action),
        (Handled::Replayed, Action::Ack)
    );
    assert_eq!(shipped.load(Ordering::SeqCst), 1, "shipped once");
}

#[tokio::test]
async fn an_order_resent_with_a_new_sent_at_is_answered_from_its_record_not_dead_lettered() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let sent_at = IgnoredFields::new(["/sent_at"]).expect("pointer");
    let consumer =
        shipper(Engine::new(MemoryStore::new()), Arc::clone(&shipped)).ignore_fields(sent_at);
    let stamped = |at: &str| {
        Message::new(format!(
            r#"{{"order_id":"o-1","sku":"tea","sent_at":"{at}"}}"#
        ))
    };
    tell(&consumer, stamped("10:00")).await;
    let (resent, action) = tell(&consumer, stamped("10:05")).await;
    assert_eq!((resent.handled, action), (Handled::Replayed, Action::Ack));
    let (reused, _) = tell(&consumer, order("o-1", "coffee")).await;
    assert_eq!(
        reused.handled,
        Handled::KeyReused,
        "other fields still count"
    );
    assert_eq!(shipped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_transient_failure_is_redelivered_with_growing_backoff_then_dead_lettered_with_its_error()
{
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::default());
    let mut delays = Vec::new();
    for delivery in 1..=2 {
        let (verdict, action) =
            tell(&consumer, order("o-2", "carrier-down").delivered(delivery)).await;
        assert_eq!(
            verdict.handled,
            Handled::FailedTransient("the carrier is unavailable".into())
        );
        match action {
            Action::Redeliver { after } => delays.push(after),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        delays,
        [Duration::from_millis(100), Duration::from_millis(200)]
    );
    let (last, action) = tell(&consumer, order("o-2", "carrier-down").delivered(3)).await;
    assert_eq!(
        last.handled,
        Handled::Poisoned("the carrier is unavailable".into())
    );
    assert!(
        matches!(&action, Action::DeadLetter { reason } if reason == "failed on each of 3 deliveries; the last error: the carrier is unavailable"),
        "{action:?}"
    );
}

#[tokio::test]
async fn a_final_failure_is_recorded_and_acked_and_its_redelivery_replays_it() {
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::default());
    let (first, _) = tell(&consumer, order("o-3", "out-of-stock")).await;
    let (again, _) = tell(&consumer, order("o-3", "out-of-stock").delivered(2)).await;
    assert_eq!(
        (first.handled, first.action),
        (Handled::FailedFinal("out of stock".into()), Action::Ack)
    );
    assert_eq!(
        (again.handled, again.action),
        (Handled::FailedFinal("out of stock".into()), Action::Ack)
    );
}

#[tokio::test]
async fn a_duplicate_delivered_while_the_first_runs_is_not_acked_but_redelivered_soon() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let engine = Engine::new(MemoryStore::new())
        .with_policy(Policy::default().lease(Duration::from_secs(10)));
    let consumer = Arc::new(shipper(engine, Arc::clone(&shipped)));
    let first = tokio::spawn({
        let consumer = Arc::clone(&consumer);
        async move { tell(&consumer, order("o-4", "slow")).await }
    });
    // The first holds the claim while it sleeps.
    while consumer
        .engine()
        .store()
        .inspect(idem_tests::call("ship-order", "o-4").record_id())
        .await
        .ok()
        .flatten()
        .is_none()
    {
        tokio::task::yield_now().await;
    }
    let (dup, action) = tell(&consumer, order("o-4", "slow").delivered(2)).await;
    assert_eq!(dup.handled, Handled::InFlight);
    // Not after the whole 10 s lease: with the backoff.
    assert_eq!(
        action,
        Action::Redeliver {
            after: Duration::from_millis(200)
        }
    );
    let (first, _) = first.await.expect("first");
    assert_eq!(first.handled, Handled::Executed);
    assert_eq!(shipped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_message_that_cannot_be_run_is_dead_lettered_with_what_is_wrong() {
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::default());
    for (message, why) in [
        (Message::new("not json"), "the payload is not JSON"),
        (
            Message::new(r#"{"sku":"tea"}"#),
            "the payload has no `/order_id`",
        ),
        (
            Message::new(r#"{"order_id":"o-5"}"#),
            "not this handler's input",
        ),
        (
            Message::new(r#"{"order_id":"","sku":"tea"}"#),
            "not a valid idempotency key",
        ),
    ] {
        let (verdict, action) = tell(&consumer, message).await;
        assert!(
            matches!(verdict.handled, Handled::Malformed(_)),
            "{verdict:?}"
        );
        assert!(
            matches!(&action, Action::DeadLetter { reason } if reason.contains(why)),
            "{why}: {action:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_that_stays_down_holds_the_delivery_then_redelivers_it_and_never_dead_letters() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(DownStore), Arc::clone(&shipped));
    for delivery in [1, 5, 50] {
        let started = tokio::time::Instant::now();
        let (verdict, action) = tell(&consumer, order("o-6", "tea").delivered(delivery)).await;
        assert_eq!(
            started.elapsed(),
            idem_queue::DEFAULT_HOLD_WHILE_STORE_DOWN,
            "held while the store is down, up to the hold"
        );
        assert!(
            matches!(verdict.handled, Handled::StoreUnavailable(_)),
            "{verdict:?}"
        );
        assert!(
            matches!(action, Action::Redeliver { after } if after >= Duration::from_millis(100)),
            "{action:?}"
        );
    }
    // Not held: redelivered at once, with the backoff.
    let impatient =
        shipper(Engine::new(DownStore), Arc::clone(&shipped)).hold_while_store_down(Duration::ZERO);
    let started = tokio::time::Instant::now();
    let (verdict, _) = tell(&impatient, order("o-6", "tea").delivered(50)).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(
        matches!(verdict.handled, Handled::StoreUnavailable(_)),
        "{verdict:?}"
    );
    assert_eq!(shipped.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_handler_that_panics_leaves_its_message_for_after_the_lease() {
    // Nothing here waits for the lease to end, so it is far longer than any
    // panic's backtrace takes to print on a loaded machine.
    let lease = Duration::from_hours(1);
    let engine = Engine::new(MemoryStore::new()).with_policy(Policy::default().lease(lease));
    let consumer = shipper(engine, Arc::default());
    let (verdict, action) = tell(&consumer, order("o-7", "panic")).await;
    assert!(
        matches!(&verdict.handled, Handled::Unknown(why) if why.contains("label printer")),
        "{verdict:?}"
    );
    assert_eq!(action, Action::Redeliver { after: lease });
    // Its claim stays to its lease: a redelivery meanwhile is in flight.
    let (dup, _) = tell(&consumer, order("o-7", "panic").delivered(2)).await;
    assert_eq!(dup.handled, Handled::InFlight);
}

#[tokio::test]
async fn a_batch_with_failures_at_positions_1_and_3_of_10_redelivers_exactly_those() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::clone(&shipped));
    let told = Arc::new(Mutex::new(Vec::new()));
    let deliveries: Vec<Told> = (0..10)
        .map(|i| Told {
            message: order(
                &format!("b-{i}"),
                if i == 1 || i == 3 {
                    "carrier-down"
                } else {
                    "tea"
                },
            ),
            told: Arc::clone(&told),
        })
        .collect();
    let report = consumer
        .handle_batch(
            deliveries,
            BatchOptions {
                parallelism: 4,
                group_by: None,
            },
        )
        .await;
    assert_eq!(report.failures(), [1, 3]);
    assert_eq!(shipped.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn in_an_ordered_batch_a_failure_holds_back_only_the_rest_of_its_group() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::clone(&shipped));
    let told = Arc::new(Mutex::new(Vec::new()));
    // Group a: ok, fail, ok (held back); group b: ok, ok.
    let plan = [
        ("a", "a-1", "tea"),
        ("b", "b-1", "tea"),
        ("a", "a-2", "carrier-down"),
        ("b", "b-2", "tea"),
        ("a", "a-3", "tea"),
    ];
    let deliveries: Vec<Told> = plan
        .iter()
        .map(|(group, id, sku)| Told {
            message: order(id, sku).with_header("group", *group),
            told: Arc::clone(&told),
        })
        .collect();
    let options = BatchOptions {
        parallelism: 4,
        group_by: Some(|m: &Message| m.header("group").map(str::to_owned)),
    };
    let report = consumer.handle_batch(deliveries, options).await;
    assert_eq!(report.failures(), [2, 4]);
    assert_eq!(
        shipped.load(Ordering::SeqCst),
        3,
        "a-3 did not run ahead of a-2"
    );
}

#[tokio::test]
async fn an_order_delivered_twice_in_one_batch_ships_once_and_both_deliveries_are_acknowledged() {
    let shipped = Arc::new(AtomicUsize::new(0));
    let consumer = shipper(Engine::new(MemoryStore::new()), Arc::clone(&shipped));
    let told = Arc::new(Mutex::new(Vec::new()));
    // The same order twice, slow to ship: handled side by side, the second
    // would find the first in flight and be sent back to wait for it.
    let deliveries: Vec<Told> = [("o-1", "slow"), ("o-2", "tea"), ("o-1", "slow")]
        .into_iter()
        .map(|(id, sku)| Told {
            message: order(id, sku),
            told: Arc::clone(&told),
        })
        .collect();
    let report = consumer
        .handle_batch(deliveries, BatchOptions::default())
        .await;
    let verdicts: Vec<&Verdict> = report
        .items
        .iter()
        .filter_map(|i| i.as_ref().ok())
        .collect();
    assert_eq!(verdicts.len(), 3, "{report:?}");
    assert_eq!(report.failures(), Vec::<usize>::new(), "{report:?}");
    assert_eq!(verdicts[0].handled, Handled::Executed);
    assert_eq!(verdicts[1].handled, Handled::Executed);
    assert_eq!(verdicts[2].handled, Handled::Replayed);
    assert!(
        verdicts.iter().all(|v| v.action == Action::Ack),
        "{verdicts:?}"
    );
    assert_eq!(
        shipped.load(Ordering::SeqCst),
        2,
        "o-1 shipped once, o-2 once"
    );
}
