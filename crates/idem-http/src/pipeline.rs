//! The answer pipeline: a covered request's handler run through the engine,
//! its answer recorded, a retry answered with the record. Written once for
//! every adapter; each brings its [`Framework`].

use std::future::Future;

use bytes::Bytes;

use idem_core::adapter::{Begun, Claimed, Completion, Execution};
use idem_core::{Call, Claim, CommitError, Engine, Outcome, StoreTransaction};

use crate::detached::{spawn_on_tokio, CallerGone, Detached};
use crate::framework::Framework;
use crate::headers::IDEMPOTENT_REPLAYED;
use crate::problem::Problem;
use crate::record::decode;
use crate::recording::{record_answer, Recording};
use crate::run::Run;

/// Runs `handler` through `engine` for `call` and answers: the handler's
/// answer (recorded for retries when the policy says so), the replay of an
/// earlier one, or the problem for an engine error.
///
/// The steps, for every adapter:
/// - a caller that went away (`gone`) before the handler started: the claim
///   is released, nothing runs;
/// - the handler runs with its route's `settings` at hand
///   ([`current_settings`](crate::current_settings)) and may hand over its
///   open transaction ([`hand_over`](crate::hand_over));
/// - a handler that settled its claim itself (a `commit_response`): its
///   answer is served as it is;
/// - else the answer is read for recording ([`record_answer`]): left
///   out by the policy, the claim is released (and a transaction handed
///   over rolled back); too large to record, it is served and retries get
///   the stand-in;
/// - the record is written by the engine, or, with a transaction handed
///   over, inside it ([`Claim::commit`]);
/// - a replay gets the `Idempotent-Replayed: true` mark.
///
/// Both steps in one: [`start`], then [`answer_claimed`]. Run it inside a
/// [`Detached`](crate::adapter::Detached), which keeps a handler that holds a claim
/// from being cancelled half-way; the adapters instead take the first step
/// in the request's own task and detach only the second, so that a replay
/// or a refusal allocates nothing to outlive its client.
pub async fn answer<F, H, Fut>(
    framework: &F,
    engine: &Engine,
    call: &Call,
    handler: H,
    gone: CallerGone,
) -> F::Answer
where
    F: Framework,
    H: FnOnce(Claim) -> Fut,
    Fut: Future<Output = F::Answer>,
{
    match start(framework, engine, call).await {
        Started::Answered(answer) => answer,
        Started::Claimed(claimed) => {
            answer_claimed(framework, engine, call, claimed, handler, gone).await
        }
    }
}

/// What [`start`] found for a call: its answer already, or its claim.
#[derive(Debug)]
pub enum Started<A> {
    /// The answer without running anything: the replay of the recorded
    /// answer (marked `Idempotent-Replayed: true`), or the problem (the key
    /// reused for another request, the call in flight, the store down).
    Answered(A),
    /// The claim, to run the handler under with [`answer_claimed`].
    Claimed(Claimed),
}

/// The whole pipeline as an adapter on tokio runs it: [`start`] in the
/// request's own task (a replay or a refusal is answered there, and a
/// client that went away meanwhile has a claim that lands released), then
/// [`answer_claimed`] inside a [`Detached`]: driven in the request's task,
/// and handed whole to a task of its own if that task drops it (the client
/// hung up, a timeout gave up), so that the handler is never cancelled
/// half-way and its answer is recorded for the retry. Dropped before the
/// handler started, the claim is released instead. A handler that panics
/// answers [`panicked`]'s problem; its claim is kept until the lease ends.
pub async fn respond<F, H, Fut>(framework: F, engine: Engine, call: Call, handler: H) -> F::Answer
where
    F: Framework + Clone + Send + Sync + 'static,
    F::Answer: Send + 'static,
    F::Head: Send,
    F::Body: Send,
    H: FnOnce(Claim) -> Fut + Send + 'static,
    Fut: Future<Output = F::Answer> + Send + 'static,
{
    let claimed = match start(&framework, &engine, &call).await {
        Started::Answered(answer) => return answer,
        Started::Claimed(claimed) => claimed,
    };
    let (record, detached) = (*call.record_id(), framework.clone());
    Detached::new(
        |gone| async move {
            answer_claimed(&detached, &engine, &call, claimed, handler, gone).await
        },
        spawn_on_tokio,
    )
    .await
    .unwrap_or_else(|| panicked(&framework, &record))
}

/// The pipeline's first step, in the request's own task: takes the claim
/// for `call` ([`Engine::begin`]), or answers a retry with its record, or
/// answers the problem. Dropped while the claim is being taken, a claim that
/// lands is released: nothing ran.
pub async fn start<F: Framework>(
    framework: &F,
    engine: &Engine,
    call: &Call,
) -> Started<F::Answer> {
    match engine.begin(call).await {
        Ok(Begun::Claimed(claimed)) => Started::Claimed(claimed),
        Ok(Begun::Replayed(outcome)) => Started::Answered(replay(framework, call, &outcome)),
        Err(e) => Started::Answered(framework.problem(&Problem::for_error(&e))),
    }
}

/// The pipeline's second step: runs `handler` under `claimed` (the claim
/// [`start`] took for `call`) and answers with what it answered, recorded
/// for retries as the steps above say. Run it inside a
/// [`Detached`](crate::adapter::Detached).
pub async fn answer_claimed<F, H, Fut>(
    framework: &F,
    engine: &Engine,
    call: &Call,
    claimed: Claimed,
    handler: H,
    gone: CallerGone,
) -> F::Answer
where
    F: Framework,
    H: FnOnce(Claim) -> Fut,
    Fut: Future<Output = F::Answer>,
{
    let result = engine
        .execute_claimed(call, claimed, |claim| async move {
            if gone.before_start() {
                // Nobody waits for this answer, and nothing has run.
                return Completion::Release(framework.nobody());
            }
            let own = claim.clone();
            let run = Run::new(framework.settings());
            // Boxed: a handler's future is kilobytes, and every layer
            // above (the run, the claim, the engine, `Detached`) would hold
            // it and move it; boxed, they hold a pointer.
            let answer = run.scope(Box::pin(handler(claim))).await;
            let pending = run.take_pending();
            // The handler settled its record itself, in its own transaction:
            // the engine knows, nothing is encoded again.
            if own.is_settled() {
                if let Some(tx) = pending {
                    tx.roll_back().await;
                }
                return Completion::Keep(answer);
            }
            let (answer, outcome) = match record_answer(framework, answer).await {
                Recording::Record(answer, outcome) => (answer, outcome),
                Recording::Unrecordable(answer) => {
                    // The handler ran: releasing would let a retry run it
                    // again. Retries get a stand-in that says so instead.
                    tracing::warn!(target: "idem", "response not recorded: larger than the limit or unreadable; retries get response-not-recorded");
                    (answer, framework.not_recorded())
                }
                Recording::Release(answer) => {
                    if let Some(tx) = pending {
                        tx.roll_back().await;
                    }
                    return Completion::Release(answer);
                }
            };
            let Some(tx) = pending else {
                return Completion::Record {
                    value: answer,
                    outcome,
                };
            };
            // The commit tells the engine how the claim ended; what is
            // returned here is only the answer.
            match tx.record_and_commit(own, outcome).await {
                Ok(()) => Completion::Keep(answer),
                // The claim says what became of it (kept: another call holds
                // the key, or the commit is uncertain; released: nothing was
                // applied) except after a conflict, which releases it here.
                Err(e) => Completion::Release(framework.problem(&Problem::for_commit_error(&e))),
            }
        })
        .await;
    match result {
        Ok(Execution::Executed(answer)) => answer,
        Ok(Execution::Replayed(outcome)) => replay(framework, call, &outcome),
        Err(e) => framework.problem(&Problem::for_error(&e)),
    }
}

/// A retry's answer: the recorded one, marked `Idempotent-Replayed: true`.
fn replay<F: Framework>(framework: &F, call: &Call, outcome: &Outcome) -> F::Answer {
    let replayed = decode(outcome).and_then(|mut recorded| {
        recorded
            .headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case(IDEMPOTENT_REPLAYED));
        recorded
            .headers
            .push((IDEMPOTENT_REPLAYED.to_owned(), Bytes::from_static(b"true")));
        framework.replay(recorded)
    });
    replayed.unwrap_or_else(|e| {
        if e.is_newer_format() {
            tracing::warn!(target: "idem", record = %call.record_id(), "recorded response written by a newer version of idem; answered 503 until this instance is upgraded");
            return framework.problem(&Problem::record_format_newer());
        }
        tracing::error!(target: "idem", record = %call.record_id(), part = e.0, "recorded response cannot be decoded");
        framework.problem(&Problem::replay_unreadable())
    })
}

/// The answer of a handler that panicked (its [`Detached`](crate::adapter::Detached)
/// answered `None`): 500 `handler-failed`. Whatever the handler did may have
/// taken effect: the engine keeps the claim until its lease ends.
pub fn panicked<F: Framework>(framework: &F, call: &idem_core::RecordId) -> F::Answer {
    tracing::error!(target: "idem", record = %call, "the handler panicked; its outcome is unknown and its claim is kept until the lease ends");
    framework.problem(&Problem::handler_failed())
}

/// Records `answer` under `claim` inside `tx`, the handler's own open
/// transaction, and commits: the adapters' `commit_response`. Under the
/// record policy: an answer left out rolls the transaction back; one too
/// large to record commits the stand-in.
///
/// # Errors
///
/// [`CommitError::Conflict`]: what an optimistic transaction read changed;
/// nothing was applied and the claim still holds. Every other failure is
/// answered with its problem.
pub async fn commit_answer<F: Framework, T: StoreTransaction>(
    framework: &F,
    tx: T,
    claim: &Claim,
    answer: F::Answer,
) -> Result<F::Answer, CommitError> {
    let (answer, outcome) = match record_answer(framework, answer).await {
        Recording::Record(answer, outcome) => (answer, outcome),
        Recording::Unrecordable(answer) => (answer, framework.not_recorded()),
        Recording::Release(answer) => {
            claim.roll_back(tx).await;
            return Ok(answer);
        }
    };
    match claim.commit(tx, &outcome).await {
        Ok(()) => Ok(answer),
        Err(e @ CommitError::Conflict(_)) => Err(e),
        Err(e) => Ok(framework.problem(&Problem::for_commit_error(&e))),
    }
}

#[cfg(test)]
mod tests {
    //! The pipeline with the smallest framework there is: an answer is a
    //! status and a body. What a new adapter writes is this one impl.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use idem_core::{Fingerprint, IdempotencyKey, MemoryStore, Outcome, Scope, Store};

    use super::*;
    use crate::framework::AnswerBody;
    use crate::record::{encode, RecordedResponse, Unreadable};
    use crate::settings::Settings;

    #[derive(Debug, PartialEq, Eq)]
    struct Plain {
        status: u16,
        headers: Vec<(String, Bytes)>,
        body: Vec<u8>,
    }

    struct Bare(Settings);

    impl Framework for Bare {
        type Answer = Plain;

        fn settings(&self) -> Settings {
            self.0
        }

        // Its answers are whole: the head keeps the body too, and a body
        // handed back unread is the head's.
        type Head = Plain;
        type Body = http_body_util::Full<Bytes>;

        fn split(&self, answer: Plain) -> Result<(Plain, Self::Body), Plain> {
            let body = http_body_util::Full::new(Bytes::from(answer.body.clone()));
            Ok((answer, body))
        }

        fn status(&self, head: &Plain) -> u16 {
            head.status
        }

        fn headers<'h>(&self, head: &'h Plain) -> Vec<(&'h str, &'h [u8])> {
            head.headers
                .iter()
                .map(|(n, v)| (n.as_str(), &v[..]))
                .collect()
        }

        fn join(&self, head: Plain, body: AnswerBody<Self::Body>) -> Plain {
            match body {
                AnswerBody::Whole { data, .. } => Plain {
                    body: data.to_vec(),
                    ..head
                },
                AnswerBody::Unread(_) | AnswerBody::Unrecordable(_) => head,
            }
        }

        fn replay(&self, recorded: RecordedResponse) -> Result<Plain, Unreadable> {
            Ok(Plain {
                status: recorded.status,
                headers: recorded.headers,
                body: recorded.body.to_vec(),
            })
        }

        fn problem(&self, problem: &Problem) -> Plain {
            Plain {
                status: problem.status(),
                headers: Vec::new(),
                body: problem.body().into_bytes(),
            }
        }

        fn nobody(&self) -> Plain {
            Plain {
                status: 499,
                headers: Vec::new(),
                body: Vec::new(),
            }
        }
    }

    fn call(key: &str) -> Call {
        let mut fp = Fingerprint::builder("test");
        fp.bytes("body", b"debit 10");
        Call::new(
            Scope::global(),
            IdempotencyKey::parse(key).expect("key"),
            fp.finish(),
        )
    }

    /// Sends `call` through the pipeline; the handler answers `status` and
    /// `body`, counting its runs.
    async fn send(
        engine: &Engine,
        key: &str,
        runs: &AtomicUsize,
        status: u16,
        body: &[u8],
    ) -> Plain {
        let settings = Settings {
            max_response_body: 16,
            ..Settings::default()
        };
        let handler = |_claim| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Plain {
                status,
                headers: Vec::new(),
                body: body.to_vec(),
            }
        };
        answer(
            &Bare(settings),
            engine,
            &call(key),
            handler,
            CallerGone::default(),
        )
        .await
    }

    #[tokio::test]
    async fn a_retry_gets_the_recorded_answer_marked_as_a_replay_and_nothing_runs_twice() {
        let engine = Engine::new(MemoryStore::new());
        let runs = AtomicUsize::new(0);
        let first = send(&engine, "k1", &runs, 201, b"debited").await;
        let retry = send(&engine, "k1", &runs, 201, b"debited again").await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!((retry.status, &retry.body), (201, &first.body));
        assert_eq!(
            retry.headers,
            [(IDEMPOTENT_REPLAYED.to_owned(), Bytes::from_static(b"true"))]
        );
    }

    #[tokio::test]
    async fn a_server_error_is_not_recorded_and_the_retry_runs_again() {
        let engine = Engine::new(MemoryStore::new());
        let runs = AtomicUsize::new(0);
        assert_eq!(send(&engine, "k2", &runs, 503, b"down").await.status, 503);
        assert_eq!(
            send(&engine, "k2", &runs, 201, b"debited").await.status,
            201
        );
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_answer_too_large_to_record_is_served_once_and_never_run_again() {
        let engine = Engine::new(MemoryStore::new());
        let runs = AtomicUsize::new(0);
        let big = send(&engine, "k3", &runs, 200, &[b'x'; 17]).await;
        assert_eq!(big.body.len(), 17);
        let retry = send(&engine, "k3", &runs, 200, b"small").await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(retry.status, 500);
        let body = String::from_utf8(retry.body).expect("problem+json");
        assert!(body.contains("response-not-recorded"), "{body}");
    }

    #[tokio::test]
    async fn a_record_from_a_newer_version_is_refused_for_now_and_nothing_runs() {
        // Mid-rollout: an upgraded instance recorded the answer in format 3.
        let store = MemoryStore::new();
        let engine = Engine::new(store.clone());
        let c = call("k4");
        let Ok(idem_core::store::Begin::Acquired(lease)) = store
            .begin(
                c.record_id(),
                c.fingerprint(),
                std::time::Duration::from_secs(30),
            )
            .await
        else {
            panic!("a fresh key")
        };
        let mut newer = encode(201, &[], b"debited").into_bytes();
        newer[3] = b'3';
        store
            .complete(
                c.record_id(),
                &lease,
                &Outcome::new(newer),
                std::time::Duration::from_mins(1),
            )
            .await
            .expect("complete");
        let runs = AtomicUsize::new(0);
        let retry = send(&engine, "k4", &runs, 201, b"debited again").await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "not run again");
        assert_eq!(retry.status, 503);
        let body = String::from_utf8(retry.body).expect("problem+json");
        assert!(body.contains("record-format-newer"), "{body}");
    }
}
