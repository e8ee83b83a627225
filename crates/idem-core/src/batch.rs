//! Batches: work its caller runs as one batch (a queue consumer's fetched
//! deliveries), so that a store able to send many claims or completions in
//! one call does so for the calls made inside it, and sends every other
//! call (an HTTP request) at once, alone.

use std::future::Future;

tokio::task_local! {
    static IN_BATCH: ();
}

/// Runs `work` as one batch: the claims and completions it asks for at once
/// may go to the store together, in one call (on Redis, one script call per
/// hash slot: `idem_redis::RedisStore::with_batching`). Each is answered as
/// if it had been sent alone. A queue consumer's
/// `Consumer::handle_batch` runs each batch so.
///
/// ```
/// use idem_core::{Call, Engine, Fingerprint, IdempotencyKey, MemoryStore, Never, Scope};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::new(MemoryStore::new());
/// let order = |key: &str| -> Result<Call, Box<dyn std::error::Error>> {
///     let body = serde_json::json!({ "order": key });
///     Ok(Call::new(Scope::new("orders"), IdempotencyKey::parse(key)?, Fingerprint::of("ship", &body)?))
/// };
/// let (first, second) = (order("order-1")?, order("order-2")?);
/// let (a, b) = idem_core::adapter::in_batch(async {
///     tokio::join!(
///         engine.run(&first, |_claim| async { Ok::<_, Never>(String::from("shipped 1")) }),
///         engine.run(&second, |_claim| async { Ok::<_, Never>(String::from("shipped 2")) }),
///     )
/// })
/// .await;
/// assert!(a.is_ok() && b.is_ok());
/// assert!(!idem_core::adapter::is_in_batch());
/// # Ok(())
/// # }
/// ```
pub async fn in_batch<F: Future>(work: F) -> F::Output {
    IN_BATCH.scope((), work).await
}

/// Whether the current task runs a batch ([`in_batch`]): for stores, which
/// send a batch's calls together and every other call alone.
pub fn is_in_batch() -> bool {
    IN_BATCH.try_with(|()| ()).is_ok()
}
