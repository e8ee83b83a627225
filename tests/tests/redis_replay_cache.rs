//! `RedisStore::with_replay_cache` as retrying clients and operators meet
//! it: retries of a finished payment answered in process, and never a
//! replay of a record that expired or was removed, whether the removal was
//! made on another instance or while this one was not listening. Each test
//! runs its own Redis server, so that its command counts and its killed
//! connections are its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{
    Call, Engine, Error, Fingerprint, IdempotencyKey, Never, Policy, Ran, Removal, Store,
};
use idem_redis::RedisStore;
use idem_tests::{redis_command_calls, redis_connection, unique_prefix, PrivateRedis, Server};

/// One instance of a payments service: its engine on a store with the
/// cache, and the debits its operation made.
struct Instance {
    engine: Engine,
    debits: Arc<AtomicUsize>,
}

impl Instance {
    async fn start(url: &str, prefix: &str, policy: Policy) -> Self {
        let store = RedisStore::connect(url)
            .await
            .expect("private redis")
            .with_prefix(prefix)
            .with_replay_cache(1 << 20, Duration::from_mins(1));
        Self {
            engine: Engine::new(store).with_policy(policy),
            debits: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Debits once per execution; the receipt names the debit.
    async fn pay(&self, call: &Call) -> Result<Ran<String>, Error<Never>> {
        let debits = Arc::clone(&self.debits);
        self.engine
            .run(call, |_| async move {
                let n = debits.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, Never>(format!("receipt of debit {n}"))
            })
            .await
    }
}

fn payment(key: &str, amount: u64) -> Call {
    Call::new(
        "account-7",
        IdempotencyKey::parse(key).expect("key"),
        Fingerprint::of("debit", &amount).expect("fingerprint"),
    )
}

/// The script calls the server has answered.
async fn script_calls(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let calls = redis_command_calls(con).await;
    calls.get("evalsha").copied().unwrap_or(0)
}

/// Retries `call` until a retry is answered without a script call (the
/// cache fills once the wake channel is subscribed); panics after 2 s.
async fn until_cached(
    instance: &Instance,
    call: &Call,
    con: &mut redis::aio::MultiplexedConnection,
) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let before = script_calls(con).await;
        let retry = instance.pay(call).await.expect("retry");
        assert!(retry.is_replayed(), "{retry:?}");
        if script_calls(con).await == before {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no retry was answered from the cache within 2 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An operator removes `call`'s record through another instance.
async fn remove_elsewhere(url: &str, prefix: &str, call: &Call) {
    let elsewhere = RedisStore::connect(url)
        .await
        .expect("private redis")
        .with_prefix(prefix);
    assert_eq!(
        elsewhere
            .remove(call.record_id(), false)
            .await
            .expect("remove"),
        Removal::Removed
    );
}

/// Retries `call` until it runs again; panics after 2 s. Returns how long
/// that took.
async fn until_run_again(instance: &Instance, call: &Call) -> Duration {
    let start = Instant::now();
    loop {
        match instance.pay(call).await.expect("retry") {
            Ran::Executed(_) => return start.elapsed(),
            Ran::Replayed(_) => {
                assert!(
                    start.elapsed() < Duration::from_secs(2),
                    "the removed payment was still replayed 2 s after its removal"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

async fn retries_of_a_finished_payment_cost_redis_nothing(kind: Server) {
    let server = PrivateRedis::start_on(kind, false);
    let mut con = redis_connection(&server.url()).await;
    let instance = Instance::start(&server.url(), &unique_prefix("cache"), Policy::default()).await;
    let call = payment("pay-1", 500);

    let first = instance.pay(&call).await.expect("first");
    assert_eq!(first, Ran::Executed("receipt of debit 1".to_owned()));
    until_cached(&instance, &call, &mut con).await;

    // 64 impatient clients retry at once.
    let calls = script_calls(&mut con).await;
    let retries = futures_util::future::join_all((0..64).map(|_| instance.pay(&call))).await;
    for retry in retries {
        assert_eq!(
            retry.expect("retry"),
            Ran::Replayed("receipt of debit 1".to_owned())
        );
    }
    // A retry with another amount is refused, from the cache too.
    let changed = instance.pay(&payment("pay-1", 900)).await;
    assert!(matches!(changed, Err(Error::Mismatch)), "{changed:?}");
    assert_eq!(script_calls(&mut con).await, calls, "no retry asked Redis");
    assert_eq!(instance.debits.load(Ordering::SeqCst), 1);
}

async fn a_payment_removed_on_another_instance_runs_again_here(kind: Server) {
    let server = PrivateRedis::start_on(kind, false);
    let mut con = redis_connection(&server.url()).await;
    let prefix = unique_prefix("cache");
    let here = Instance::start(&server.url(), &prefix, Policy::default()).await;
    let call = payment("pay-2", 500);
    here.pay(&call).await.expect("first");
    until_cached(&here, &call, &mut con).await;

    remove_elsewhere(&server.url(), &prefix, &call).await;
    let took = until_run_again(&here, &call).await;
    println!("the other instance's removal was seen here after {took:?}");
    assert_eq!(here.debits.load(Ordering::SeqCst), 2);
}

async fn a_retry_after_the_records_ttl_is_refused_not_replayed(kind: Server) {
    let server = PrivateRedis::start_on(kind, false);
    let mut con = redis_connection(&server.url()).await;
    let ttl = Duration::from_millis(400);
    let instance = Instance::start(
        &server.url(),
        &unique_prefix("cache"),
        Policy::default().ttl(ttl),
    )
    .await;
    let call = payment("pay-3", 500);
    let completed = Instant::now();
    instance.pay(&call).await.expect("first");
    until_cached(&instance, &call, &mut con).await;
    assert!(completed.elapsed() < ttl, "cached before the TTL ran out");

    // Replayed (from the cache or Redis) while the record lives; then
    // neither replayed from the cache nor run again: refused by the trace.
    let mut after = instance.pay(&call).await;
    while matches!(after, Ok(Ran::Replayed(_))) && completed.elapsed() < ttl * 10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        after = instance.pay(&call).await;
    }
    assert!(matches!(after, Err(Error::Expired)), "{after:?}");
    assert_eq!(instance.debits.load(Ordering::SeqCst), 1, "debited once");
}

async fn a_removal_made_while_this_instance_was_not_listening_is_not_missed(kind: Server) {
    let server = PrivateRedis::start_on(kind, false);
    let mut con = redis_connection(&server.url()).await;
    let prefix = unique_prefix("cache");
    let here = Instance::start(&server.url(), &prefix, Policy::default()).await;
    let call = payment("pay-4", 500);
    here.pay(&call).await.expect("first");
    until_cached(&here, &call, &mut con).await;

    // The wake channel's connection drops, and the removal's message is
    // published while nobody here listens.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut con)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1, "this instance's subscription");
    remove_elsewhere(&server.url(), &prefix, &call).await;
    let took = until_run_again(&here, &call).await;
    println!("the removal was seen here after {took:?}");
    assert_eq!(here.debits.load(Ordering::SeqCst), 2);
}

idem_tests::on_redis_and_valkey!(
    retries_of_a_finished_payment_cost_redis_nothing,
    a_payment_removed_on_another_instance_runs_again_here,
    a_retry_after_the_records_ttl_is_refused_not_replayed,
    a_removal_made_while_this_instance_was_not_listening_is_not_missed
);
