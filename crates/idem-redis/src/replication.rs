//! The durable mode's `WAIT`, shared: group commit.
//!
//! A change whose reply has arrived is in the primary's replication stream.
//! Instead of following each change with its own `WAIT` (which holds the
//! store's one multiplexed connection until a replica answers, so that
//! every other request queues behind it), each caller joins the next
//! *round*: one task sends a small write of its own (the round's mark) and
//! then `WAIT replicas timeout`, and answers every caller that joined
//! before the round began. Replication is one ordered stream, so a replica
//! that has the mark has every change applied before it, whichever
//! connection sent them; and a read (a replay) that saw a change happened
//! after the change entered the stream. One round trip to the replicas
//! covers every request that arrived while the previous round was out.
//!
//! The rounds have a connection of their own, so that a `WAIT` blocks no
//! request's change. Behind Sentinel a round only covers callers whose
//! change went to the primary the round's mark goes to (the primary's
//! generation): a caller whose primary was replaced meanwhile is told its
//! change is not known to be replicated.
//!
//! On Redis Cluster each change is followed by its own `WAIT` on the node
//! of its slot, in one pipeline (a round would need one mark per node).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::StoreError;
use redis::aio::ConnectionManager;
use redis::Value;
use tokio::sync::oneshot;

use crate::sentinel::manager_config;
use crate::wake::Server;

/// `WAIT replicas timeout` for every change, shared between concurrent
/// changes.
#[derive(Clone)]
pub(crate) struct Replication {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
    rounds: Arc<Rounds>,
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("replicas", &self.replicas)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What a caller learns from its round.
type Answer = Result<(), StoreError>;

#[derive(Default)]
struct Rounds {
    next: Mutex<Next>,
    /// The rounds' own connection, and the primary's generation it was
    /// made for.
    own: Mutex<Option<(Option<u64>, ConnectionManager)>>,
}

/// The callers waiting for the next round, and whether a round task runs.
#[derive(Default)]
struct Next {
    running: bool,
    callers: Vec<(Option<u64>, oneshot::Sender<Answer>)>,
}

impl Replication {
    pub(crate) fn new(replicas: u32, timeout: Duration) -> Self {
        Self {
            replicas,
            timeout,
            rounds: Arc::default(),
        }
    }

    /// `WAIT`'s arguments: the replicas, and the timeout in whole
    /// milliseconds (at least 1: 0 would wait for ever).
    pub(crate) fn wait_command(&self) -> redis::Cmd {
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.replicas)
            .arg(micros(self.timeout).div_ceil(1000).max(1));
        wait
    }

    /// The error for a change that `acked` replicas had within the timeout,
    /// if too few.
    pub(crate) fn check(&self, what: &str, acked: i64) -> Answer {
        if acked >= i64::from(self.replicas) {
            return Ok(());
        }
        Err(StoreError::unavailable_because(format!(
            "redis {what}: the change reached {acked} of the {} replicas required within {:?}, so it is not acted on",
            self.replicas, self.timeout
        )))
    }

    /// Waits until the replicas have everything the primary had when this
    /// was called (a change whose reply arrived, on a connection of
    /// `generation`), by joining the next round.
    pub(crate) async fn covered(
        &self,
        what: &'static str,
        server: &Server,
        mark: &str,
        generation: Option<u64>,
    ) -> Answer {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut next = self
                .rounds
                .next
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            next.callers.push((generation, tx));
            !std::mem::replace(&mut next.running, true)
        };
        if start {
            // A task of its own: a caller that goes away (its request was
            // dropped) must not stop the round the others wait for.
            let this = self.clone();
            let (server, mark) = (server.clone(), mark.to_owned());
            tokio::spawn(async move { this.run_rounds(server, mark).await });
        }
        match rx.await {
            Ok(answer) => {
                answer.map_err(|e| StoreError::unavailable_because(format!("redis {what}: {e}")))
            }
            Err(_) => Err(StoreError::unavailable_because(format!(
                "redis {what}: the replication round ended without an answer"
            ))),
        }
    }

    /// The rounds' own connection to the primary of `generation`, made on
    /// first use and again when the primary changes.
    async fn own_connection(
        &self,
        generation: Option<u64>,
        client: redis::Client,
    ) -> redis::RedisResult<ConnectionManager> {
        let own = |r: &Rounds| r.own.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some((made_for, connection)) = own(&self.rounds) {
            if made_for == generation {
                return Ok(connection);
            }
        }
        let connection = ConnectionManager::new_with_config(client, manager_config()).await?;
        *self
            .rounds
            .own
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((generation, connection.clone()));
        Ok(connection)
    }

    /// Rounds until nobody waits: each takes every caller that joined
    /// before it, sends the mark and `WAIT`, and answers them all.
    async fn run_rounds(self, server: Server, mark: String) {
        loop {
            let callers = {
                let mut next = self
                    .rounds
                    .next
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if next.callers.is_empty() {
                    next.running = false;
                    return;
                }
                std::mem::take(&mut next.callers)
            };
            let (generation, client) = server.generation_and_client();
            let mut round = redis::pipe();
            round
                .cmd("SET")
                .arg(&mark)
                .arg("")
                .arg("PX")
                .arg(60_000)
                .ignore()
                .add_command(self.wait_command());
            let sent = tokio::time::timeout(self.timeout + Duration::from_secs(1), async {
                let mut own = self.own_connection(generation, client).await?;
                round.query_async::<Vec<Value>>(&mut own).await
            })
            .await;
            let answer: Answer = match sent {
                Ok(Ok(replies)) => match replies.as_slice() {
                    [Value::Int(acked)] => self.check("replication", *acked),
                    other => Err(StoreError::unavailable_because(format!(
                        "WAIT answered {other:?}, not a count of replicas"
                    ))),
                },
                Ok(Err(e)) => Err(StoreError::unavailable(
                    "the replication round (SET mark, WAIT) failed",
                    e,
                )),
                Err(_) => Err(StoreError::unavailable_because(
                    "the replication round (SET mark, WAIT) got no answer",
                )),
            };
            for (theirs, tx) in callers {
                let answer = match &answer {
                    Ok(()) if theirs != generation => Err(StoreError::unavailable_because(
                        "the primary changed between the change and its replication round",
                    )),
                    Ok(()) => Ok(()),
                    Err(e) => Err(StoreError::unavailable_because(e.to_string())),
                };
                let _ = tx.send(answer);
            }
        }
    }
}
