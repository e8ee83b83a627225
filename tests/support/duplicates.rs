//! Duplicates asked at once: `n` calls of one operation under one key,
//! each by a holder of its own, counted by what they got.

use std::future::Future;

use idem_core::{Call, Claim, Engine, Failure, Ran};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Runs `n` duplicates of `call` at once on `engine`, the `i`-th as the
/// holder `{who}{i}` (`op(claim, holder)`), and answers how many ran and
/// how many were replayed. Any other answer fails the test: every
/// duplicate is owed the first one's result.
pub async fn run_duplicates<T, E, F, Fut>(
    engine: &Engine,
    call: &Call,
    n: usize,
    who: &str,
    op: F,
) -> (usize, usize)
where
    T: Serialize + DeserializeOwned + Send + std::fmt::Debug + 'static,
    E: Failure + Serialize + DeserializeOwned + Send + std::fmt::Debug + 'static,
    F: Fn(Claim, String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (engine, call, op, holder) = (
                engine.clone(),
                call.clone(),
                op.clone(),
                format!("{who}{i}"),
            );
            tokio::spawn(async move { engine.run(&call, move |claim| op(claim, holder)).await })
        })
        .collect();
    let (mut executed, mut replayed) = (0, 0);
    for task in tasks {
        match task.await.expect("a duplicate's task") {
            Ok(Ran::Executed(_)) => executed += 1,
            Ok(Ran::Replayed(_)) => replayed += 1,
            other => panic!("every duplicate gets the receipt, got {other:?}"),
        }
    }
    (executed, replayed)
}
