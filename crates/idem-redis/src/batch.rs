//! Batches: the claims and completions a store's callers ask for while one
//! of its calls is on the wire go together in the next call, one script
//! call for all of them (per hash slot on a cluster): the batch scripts of
//! [`crate::scripts`], each item's code the single script's own.
//!
//! A queue consumer that handles a fetched batch of deliveries at once, or
//! an HTTP service under load, asks for many claims in the time of one
//! round trip; each call to Redis costs its dispatch and the script's start
//! (about 5 µs of Redis CPU) whatever it does, so a batch pays that once.
//! Nothing waits for a batch to fill: the first call goes at once, and what
//! arrives while it is on the wire goes in the next (group commit). A lone
//! caller pays a hand-over between tasks, no round trip.
//!
//! What does not change: each item runs exactly the single script's code,
//! with its own keys, and a batch runs atomically on the server as any
//! script does. An item that fails (a corrupt record, a newer format, a
//! write refused on a full server) fails alone, before its first write. A
//! batch that fails as a whole (the connection, a timeout) fails each of
//! its items as the single call would have: a begin whose answer is lost
//! leaves its claim to its lease, as one sent alone does. A batch is sent
//! by a task of its own, so a caller that goes away cancels nothing that is
//! on the wire: its answer is still read, and a claim it grants released
//! ([`idem_core`]'s pending begin).

use std::sync::{Mutex, PoisonError};

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use idem_core::{StoreError, StoreErrorKind};
use redis::{Script, Value};
use tokio::sync::{oneshot, Notify};

use crate::scripts::evalsha;
use crate::{slot, RedisStore};

/// At most this many items in one script call.
const MOST: usize = 64;

/// At most this many turns of the runtime to let a growing batch grow.
const GATHER: usize = 8;

/// At most this many calls of a lane on the wire at once.
const ON_THE_WIRE: usize = 4;

/// Which script a batch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    Begin,
    Complete,
}

impl Lane {
    fn name(self) -> &'static str {
        match self {
            Self::Begin => "begin",
            Self::Complete => "complete",
        }
    }

    /// The script for `n` items: the single one for one.
    fn script(self, store: &RedisStore, n: usize) -> &Script {
        match (self, n) {
            (Self::Begin, 1) => &store.scripts.begin,
            (Self::Begin, _) => &store.scripts.begin_batch,
            (Self::Complete, 1) => &store.scripts.complete,
            (Self::Complete, _) => &store.scripts.complete_batch,
        }
    }
}

/// The items waiting for the next call of each lane.
#[derive(Default)]
pub(crate) struct Batcher {
    begin: Waiting,
    complete: Waiting,
}

/// A lane's queue, and the signal that it grew.
#[derive(Default)]
struct Waiting {
    queue: Mutex<Queue>,
    grew: Notify,
}

#[derive(Default)]
struct Queue {
    items: Vec<Item>,
    /// Whether a task is sending this lane's calls (it takes what is
    /// queued until nothing is queued nor on the wire).
    sending: bool,
}

/// One caller's keys and arguments, and where its answer goes.
pub(crate) struct Item {
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
    answer: oneshot::Sender<Result<Value, StoreError>>,
}

impl Batcher {
    fn lane(&self, lane: Lane) -> &Waiting {
        match lane {
            Lane::Begin => &self.begin,
            Lane::Complete => &self.complete,
        }
    }
}

impl Waiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// At most [`MOST`] of the queued items, the oldest.
    fn take(&self) -> Vec<Item> {
        let mut queue = self.lock();
        let rest = queue.items.len().saturating_sub(MOST);
        let mut items = std::mem::take(&mut queue.items);
        queue.items = items.split_off(items.len() - rest);
        items
    }
}

impl RedisStore {
    /// `lane`'s script on `keys` with `args`, sent with whatever else is
    /// asked meanwhile; its reply as the single script would give it.
    pub(crate) async fn batched(
        &self,
        lane: Lane,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
    ) -> Result<Value, StoreError> {
        let (answer, answered) = oneshot::channel();
        let waiting = self.batcher.lane(lane);
        let start = {
            let mut queue = waiting.lock();
            queue.items.push(Item { keys, args, answer });
            !std::mem::replace(&mut queue.sending, true)
        };
        if start {
            let store = self.clone();
            tokio::spawn(async move { store.send_batches(lane).await });
        } else {
            waiting.grew.notify_one();
        }
        answered.await.unwrap_or_else(|_| {
            Err(StoreError::unavailable_because(format!(
                "redis {}: the task sending it stopped (the runtime is shutting down)",
                lane.name()
            )))
        })
    }

    /// Sends `lane`'s queued items until none is left: a call with what is
    /// queued whenever fewer than [`ON_THE_WIRE`] of its calls are on the
    /// wire, so that a lone call goes at once and what arrives while they
    /// are all out goes together in the next.
    async fn send_batches(&self, lane: Lane) {
        let waiting = self.batcher.lane(lane);
        // If this task ends early (a panic, the runtime's shutdown), the
        // next caller starts another; what it held is answered as failed
        // when its senders drop.
        let _sending = Sending(&waiting.queue);
        let mut on_wire = FuturesUnordered::new();
        loop {
            if on_wire.is_empty() {
                // Callers asking together (a fetched batch of deliveries,
                // handled at once) may still be queueing theirs: while the
                // queue grows, a little longer (a few yields, each a turn
                // of the runtime's other ready tasks), so that they go in
                // one call.
                let mut queued = 0;
                for _ in 0..GATHER {
                    let now = waiting.lock().items.len();
                    if now == queued || now >= MOST {
                        break;
                    }
                    queued = now;
                    tokio::task::yield_now().await;
                }
            }
            while on_wire.len() < ON_THE_WIRE {
                let items = waiting.take();
                if items.is_empty() {
                    break;
                }
                for group in self.by_slot(items) {
                    on_wire.push(self.send(lane, group));
                }
            }
            if on_wire.is_empty() {
                let mut queue = waiting.lock();
                if queue.items.is_empty() {
                    queue.sending = false;
                    return;
                }
                continue;
            }
            if on_wire.len() < ON_THE_WIRE {
                // A call comes back, or another caller asks.
                let grew = waiting.grew.notified();
                futures_util::future::select(on_wire.next(), std::pin::pin!(grew)).await;
            } else {
                on_wire.next().await;
            }
        }
    }

    /// `items` in one group per hash slot (on a cluster; else one group).
    fn by_slot(&self, items: Vec<Item>) -> Vec<Vec<Item>> {
        let mut groups: Vec<Vec<Item>> = Vec::new();
        for item in items {
            match groups.iter().position(|g| self.same_call(&g[0], &item)) {
                Some(at) => groups[at].push(item),
                None => groups.push(vec![item]),
            }
        }
        groups
    }

    fn same_call(&self, a: &Item, b: &Item) -> bool {
        !self.is_cluster() || slot::slot(a.keys[0].as_bytes()) == slot::slot(b.keys[0].as_bytes())
    }

    /// One call for `items`; each item answered.
    async fn send(&self, lane: Lane, items: Vec<Item>) {
        let script = lane.script(self, items.len());
        let keys: Vec<&str> = items
            .iter()
            .flat_map(|i| i.keys.iter().map(String::as_str))
            .collect();
        let args: Vec<&[u8]> = items
            .iter()
            .flat_map(|i| i.args.iter().map(Vec::as_slice))
            .collect();
        let reply = self
            .eval(lane.name(), script, &evalsha(script, &keys, &args))
            .await;
        let answers = answers(lane, reply, items.len());
        for (item, answer) in items.into_iter().zip(answers) {
            let _ = item.answer.send(answer);
        }
    }
}

/// Each item's answer in a call's reply, in order: as its script alone
/// would have answered, or the error it raised, as that call's error. A
/// call that failed fails each item; a call for one item is its answer.
fn answers(
    lane: Lane,
    reply: Result<Value, StoreError>,
    n: usize,
) -> Vec<Result<Value, StoreError>> {
    if n == 1 {
        return vec![reply];
    }
    match reply {
        Ok(Value::Array(answers)) if answers.len() == n => answers
            .into_iter()
            .map(|answer| item_answer(lane, answer))
            .collect(),
        Ok(other) => (0..n)
            .map(|_| {
                Err(StoreError::corrupt(format!(
                    "redis {}: {n} records answered {other:?}",
                    lane.name()
                )))
            })
            .collect(),
        Err(e) => {
            let mut errors: Vec<_> = (1..n).map(|_| Err(copy_of(&e))).collect();
            errors.push(Err(e));
            errors
        }
    }
}

/// Lets the next caller start a task if this one ended before its queue
/// was empty.
struct Sending<'a>(&'a Mutex<Queue>);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            queue.sending = false;
            // Answered as failed: their senders drop.
            queue.items.clear();
        }
    }
}

/// An item's answer in a batch's reply: as its script alone would have
/// answered, or the error it raised, as that call's error.
fn item_answer(lane: Lane, answer: Value) -> Result<Value, StoreError> {
    let Value::Array(parts) = &answer else {
        return Ok(answer);
    };
    let (Some(Value::BulkString(tag)), Some(Value::BulkString(error)), 2) =
        (parts.first(), parts.get(1), parts.len())
    else {
        return Ok(answer);
    };
    if tag != b"!" {
        return Ok(answer);
    }
    let error = String::from_utf8_lossy(error);
    let what = lane.name();
    Err(if let Some(at) = error.find(crate::scripts::NEWER_FORMAT) {
        let format = error.as_bytes()[at..]
            .get(crate::scripts::NEWER_FORMAT.len())
            .copied()
            .unwrap_or(b'?');
        crate::operations::newer_format(format)
    } else if error.contains(crate::scripts::CORRUPT) {
        StoreError::corrupt(format!("redis {what}: {error}"))
    } else if error.starts_with("OOM") {
        StoreError::full_because(format!(
            "redis {what}: the server is full (used memory over maxmemory, and nothing it may evict), so it takes no new record; records it keeps are still answered"
        ))
    } else {
        StoreError::unavailable_because(format!("redis {what} failed: {error}"))
    })
}

/// A batch's error, for each of its items.
fn copy_of(e: &StoreError) -> StoreError {
    let text = e.to_string();
    match e.kind() {
        StoreErrorKind::Full => StoreError::full_because(text),
        StoreErrorKind::Corrupt => StoreError::corrupt(text),
        StoreErrorKind::LeaseLost => StoreError::lease_lost(),
        _ => StoreError::unavailable_because(text),
    }
}
