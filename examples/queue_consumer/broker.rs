//! The example's in-process broker: at least once, with the fate of each
//! delivery decided by the producer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::OrderPlaced;

/// How a delivery goes wrong, decided by the producer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fate {
    Normal,
    /// The worker's task is cancelled mid-processing (shutdown, timeout).
    Cancelled,
    /// The worker's process dies mid-processing, holding its claim.
    Killed,
    /// The carrier is down for this attempt.
    CarrierDown,
}

#[derive(Clone, Debug)]
pub(crate) struct Delivery {
    pub(crate) msg: OrderPlaced,
    pub(crate) fate: Fate,
}

/// An at-least-once broker: deliveries wait in a queue; a delivery not acked
/// is redelivered after a delay.
#[derive(Default)]
pub(crate) struct Broker {
    queue: Mutex<VecDeque<Delivery>>,
    ready: Notify,
    outstanding: AtomicUsize,
    pub(crate) deliveries: AtomicUsize,
}

impl Broker {
    pub(crate) fn publish(&self, d: Delivery) {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        self.queue.lock().expect("queue lock").push_back(d);
        self.ready.notify_one();
    }

    pub(crate) fn publish_later(self: &Arc<Self>, d: Delivery, after: Duration) {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        let broker = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            broker.queue.lock().expect("queue lock").push_back(d);
            broker.ready.notify_one();
        });
    }

    pub(crate) async fn next(&self) -> Option<Delivery> {
        loop {
            if let Some(d) = self.queue.lock().expect("queue lock").pop_front() {
                self.deliveries.fetch_add(1, Ordering::SeqCst);
                return Some(d);
            }
            if self.outstanding.load(Ordering::SeqCst) == 0 {
                return None;
            }
            tokio::select! {
                () = self.ready.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    }

    /// The delivery is finished: acked, or handed back for redelivery.
    pub(crate) fn done(&self) {
        if self.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.ready.notify_waiters();
        }
    }
}
