//! A `payments` process on PostgreSQL is killed (SIGKILL) in the middle of a
//! debit; a retry on a second instance, once the dead instance's lease has
//! run out, debits exactly once. On SQLite (the example's default, no
//! server), a process killed after a debit, or in the middle of one, is
//! restarted on the same file: the retry gets the same receipt, or debits
//! once. A `payments` process on Redis or
//! PostgreSQL is frozen (SIGSTOP) in the middle of a debit past its lease; a
//! retry on a second instance takes over and debits; the frozen process
//! resumes (SIGCONT) and debits nothing.
//!
//! Runs the real example binary (`target/<profile>/examples/payments`, built
//! by `cargo build --examples`; `scripts/test.sh` builds it first).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::http::{header, StatusCode};
use idem_tests::{database_url, pg_pool, redis_url, unique_prefix, unique_schema, Payments};

fn payments_binary() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/payments
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let bin = profile_dir.join("examples").join("payments");
    assert!(
        bin.exists(),
        "{} is missing: build the examples first (`cargo build --examples`)",
        bin.display()
    );
    bin
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Instance {
    child: Child,
    url: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the example on PostgreSQL; `lease_ms` `None` keeps its default.
async fn start(schema: &str, delay_ms: u64, lease_ms: Option<u64>) -> Instance {
    let store = [
        ("DATABASE_URL", database_url()),
        ("PG_SCHEMA", schema.to_owned()),
    ];
    start_on(&store, delay_ms, lease_ms).await
}

/// Starts the example on the store the `store` variables name.
async fn start_on(store: &[(&str, String)], delay_ms: u64, lease_ms: Option<u64>) -> Instance {
    let port = free_port();
    let mut command = Command::new(payments_binary());
    command
        .env_remove("DATABASE_URL")
        .env_remove("REDIS_URL")
        .env_remove("PAYMENTS_STORE")
        .env_remove("PAYMENTS_DB")
        .env_remove("PROVIDER_URL")
        .env_remove("LEASE_MS");
    for (name, value) in store {
        command.env(name, value);
    }
    command
        .env("ADDR", format!("127.0.0.1:{port}"))
        .env("DEBIT_DELAY_MS", delay_ms.to_string())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(lease_ms) = lease_ms {
        command.env("LEASE_MS", lease_ms.to_string());
    }
    let instance = Instance {
        child: command.spawn().expect("start payments"),
        url: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    for _ in 0..300 {
        if client
            .get(format!("{}/accounts/probe", instance.url))
            .send()
            .await
            .is_ok()
        {
            return instance;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("payments did not start on {}", instance.url);
}

/// Waits until the debit sent to the first instance holds its claim (its
/// record is in the schema's table), so that the kill lands mid-debit however
/// slowly the instance got there.
async fn claimed(schema: &str) {
    let pool = pg_pool(1).await;
    let sql = format!("SELECT count(*) FROM \"{schema}\".records");
    until_a_record(|| sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone())).fetch_optional(&pool))
        .await;
}

/// Polls `count` (how many records the store holds) until it is above 0.
async fn until_a_record<F, E>(count: impl Fn() -> F)
where
    F: std::future::Future<Output = Result<Option<i64>, E>>,
{
    until_records(1, count).await;
}

/// Polls `count` until the store holds `n` records or more.
async fn until_records<F, E>(n: i64, count: impl Fn() -> F)
where
    F: std::future::Future<Output = Result<Option<i64>, E>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while count().await.ok().flatten().unwrap_or(0) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the debit never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_debit_then_retried_elsewhere_debits_once() {
    let schema = unique_schema();
    let lease_ms = 1500;
    // Instance 1 spends 3s in the payment provider; instance 2 none.
    let mut first = start(&schema, 3000, Some(lease_ms)).await;
    let second = start(&schema, 0, Some(lease_ms)).await;

    let in_flight = {
        let url = first.url.clone();
        tokio::spawn(async move { payments(&url).try_debit("ivy", "crash-1", 1000).await })
    };
    claimed(&schema).await;
    // SIGKILL in the middle of the debit: no cleanup, no release.
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    assert!(
        in_flight.await.expect("task").is_err(),
        "the client lost its answer"
    );

    // The dead instance's claim is still alive: a retry is told to wait.
    let early = payments(&second.url)
        .try_debit("ivy", "crash-1", 1000)
        .await
        .expect("retry");
    assert_eq!(early.status(), StatusCode::CONFLICT);
    assert!(early.headers().contains_key(header::RETRY_AFTER));

    // Once the lease is over, the retry takes over and debits once.
    let retried = retry_while_in_flight(&second.url, "ivy", "crash-1", 1000).await;
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert!(!retried.headers().contains_key("idempotent-replayed"));
    let receipt = retried.bytes().await.expect("receipt");
    let again = payments(&second.url)
        .try_debit("ivy", "crash-1", 1000)
        .await
        .expect("replay");
    assert_eq!(again.status(), StatusCode::CREATED);
    assert!(again.headers().contains_key("idempotent-replayed"));
    assert_eq!(again.bytes().await.expect("receipt"), receipt);
    assert_eq!(
        payments(&second.url).balance("ivy").await,
        9_000,
        "exactly one debit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holder_blocks_its_key_for_at_most_the_default_lease() {
    // With the example's defaults: how long after a SIGKILL mid-debit does a
    // client retrying every 100 ms on another instance get its debit?
    let schema = unique_schema();
    let mut first = start(&schema, 30_000, None).await;
    let second = start(&schema, 0, None).await;
    let in_flight = {
        let url = first.url.clone();
        tokio::spawn(async move { payments(&url).try_debit("ivy", "crash-1", 1000).await })
    };
    claimed(&schema).await;
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    let killed = tokio::time::Instant::now();
    let _ = in_flight.await;
    let lease = idem_core::DEFAULT_LEASE;
    let ran = loop {
        let r = payments(&second.url)
            .try_debit("ivy", "crash-1", 1000)
            .await
            .expect("retry");
        if r.status() != StatusCode::CONFLICT {
            assert_eq!(r.status(), StatusCode::CREATED);
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < lease + Duration::from_secs(2),
            "the key is still blocked {:?} after its holder died (lease {lease:?})",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("a retry ran {ran:?} after the holder was SIGKILLed (default lease {lease:?})");
    assert!(ran > lease / 2, "the dead holder's claim lived on: {ran:?}");
    assert_eq!(
        payments(&second.url).balance("ivy").await,
        9_000,
        "exactly one debit"
    );
}

/// Sends `signal` (`STOP`, `CONT`) to the instance's process.
fn signal(instance: &Instance, signal: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(instance.child.id().to_string())
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal}");
}

/// Waits until the Redis record of `account`'s debit under `key` exists:
/// the first instance holds the claim.
async fn claimed_on_redis(account: &str, key: &str) {
    let id = idem_core::RecordId::new(
        &idem_core::Scope::new(account),
        &idem_core::IdempotencyKey::parse(key).expect("key"),
    );
    // Under the key the example's store writes it (its prefix, the default
    // layout).
    let record = idem_redis::RedisStore::connect(&redis_url())
        .await
        .expect("redis")
        .with_prefix("payments:idem:")
        .key(&id);
    let mut c = idem_tests::redis_connection(&redis_url()).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found: bool = redis::AsyncCommands::exists(&mut c, &record)
            .await
            .unwrap_or(false);
        if found {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the debit never claimed its key"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two instances share the store. The first takes a debit's claim and is
/// frozen (SIGSTOP: a GC or VM pause, a frozen container) for longer than
/// its lease; the client's retry reaches the second, which takes the claim
/// over and debits; the first resumes and finds its claim lost: its debit
/// never lands, and the account is debited once.
async fn frozen_past_the_lease_debits_once(
    store: &[(&str, String)],
    account: &str,
    claimed: impl std::future::Future<Output = ()>,
) {
    let lease_ms = 1000;
    let first = start_on(store, 600, Some(lease_ms)).await;
    let second = start_on(store, 0, Some(lease_ms)).await;
    let in_flight = {
        let (url, account) = (first.url.clone(), account.to_owned());
        tokio::spawn(async move { payments(&url).try_debit(&account, "frozen-1", 100).await })
    };
    claimed.await;
    signal(&first, "STOP");
    // A renewal just before the freeze keeps the claim one lease at most;
    // the client retries while it is told the debit is in flight.
    let retried = retry_while_in_flight(&second.url, account, "frozen-1", 100).await;
    assert_eq!(retried.status(), StatusCode::CREATED, "the takeover debits");
    signal(&first, "CONT");
    let late = in_flight
        .await
        .expect("task")
        .expect("the frozen instance answers once it resumes");
    assert_eq!(
        late.status(),
        StatusCode::CONFLICT,
        "the frozen holder lost its claim and debits nothing"
    );
    assert!(late.text().await.expect("body").contains("lease-lost"));
    assert_eq!(
        payments(&second.url).balance(account).await,
        9_900,
        "one debit of 100"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_past_its_lease_then_taken_over_debits_once_on_redis() {
    // The example's Redis keys are fixed: an account of this run's own.
    let account = unique_prefix("frozen").replace(':', "-");
    let account = account.trim_end_matches('-');
    let store = [("REDIS_URL", redis_url())];
    frozen_past_the_lease_debits_once(&store, account, claimed_on_redis(account, "frozen-1")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_past_its_lease_then_taken_over_debits_once_on_postgres() {
    let schema = unique_schema();
    let store = [
        ("DATABASE_URL", database_url()),
        ("PG_SCHEMA", schema.clone()),
    ];
    frozen_past_the_lease_debits_once(&store, "ivy", claimed(&schema)).await;
}

/// A client of the instance at `url` whose requests give up after 10 s (a
/// killed instance leaves them unanswered).
/// Retries the debit as a client would while it is answered 409 (in
/// flight), every 50 ms for ten seconds at most: its answer once the claim
/// it waited on is over.
async fn retry_while_in_flight(
    url: &str,
    account: &str,
    key: &str,
    amount: u64,
) -> reqwest::Response {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = payments(url)
            .try_debit(account, key, amount)
            .await
            .expect("retry");
        if answer.status() != StatusCode::CONFLICT {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still in flight after ten seconds"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn payments(url: &str) -> Payments {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default();
    Payments::with_client(client, url)
}

/// Starts the example on the SQLite file `db` (its default store).
async fn start_on_file(db: &std::path::Path, delay_ms: u64, lease_ms: Option<u64>) -> Instance {
    let store = [("PAYMENTS_DB", db.display().to_string())];
    start_on(&store, delay_ms, lease_ms).await
}

/// Waits until the file `db` holds a record: the debit holds its claim.
async fn claimed_in_file(db: &std::path::Path) {
    claims_in_file(db, 1).await;
}

/// Waits until the file `db` holds `n` records: `n` debits hold claims.
async fn claims_in_file(db: &std::path::Path, n: i64) {
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(db))
        .await
        .expect("the example's file");
    until_records(n, || {
        sqlx::query_scalar("SELECT count(*) FROM idem_records").fetch_optional(&pool)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_then_a_kill_and_a_restart_on_sqlite_replays_the_same_receipt() {
    let db = idem_tests::sqlite_path("payments-restart");
    let mut first = start_on_file(&db, 0, None).await;
    let debited = payments(&first.url)
        .try_debit("ivy", "restart-1", 1000)
        .await
        .expect("debit");
    assert_eq!(debited.status(), StatusCode::CREATED);
    let receipt = debited.bytes().await.expect("receipt");
    // SIGKILL: nothing flushed or closed by the process itself.
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    let second = start_on_file(&db, 0, None).await;
    let retried = payments(&second.url)
        .try_debit("ivy", "restart-1", 1000)
        .await
        .expect("retry");
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert!(retried.headers().contains_key("idempotent-replayed"));
    assert_eq!(
        retried.bytes().await.expect("receipt"),
        receipt,
        "byte-identical"
    );
    assert_eq!(
        payments(&second.url).balance("ivy").await,
        9_000,
        "one debit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_debit_then_restarted_on_sqlite_debits_once() {
    let db = idem_tests::sqlite_path("payments-mid-debit");
    let lease_ms = 1500;
    let mut first = start_on_file(&db, 3000, Some(lease_ms)).await;
    let in_flight = {
        let url = first.url.clone();
        tokio::spawn(async move { payments(&url).try_debit("ivy", "crash-1", 1000).await })
    };
    claimed_in_file(&db).await;
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    assert!(
        in_flight.await.expect("task").is_err(),
        "the client lost its answer"
    );
    let second = start_on_file(&db, 0, Some(lease_ms)).await;
    // The dead process's claim outlives it, in the file: retries wait for
    // its lease, then one debits.
    let debited = loop {
        let r = payments(&second.url)
            .try_debit("ivy", "crash-1", 1000)
            .await
            .expect("retry");
        if r.status() != StatusCode::CONFLICT {
            break r;
        }
        assert!(r.headers().contains_key(header::RETRY_AFTER));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(debited.status(), StatusCode::CREATED);
    assert!(
        !debited.headers().contains_key("idempotent-replayed"),
        "run once, after the lease"
    );
    let receipt = debited.bytes().await.expect("receipt");
    let again = payments(&second.url)
        .try_debit("ivy", "crash-1", 1000)
        .await
        .expect("replay");
    assert!(again.headers().contains_key("idempotent-replayed"));
    assert_eq!(again.bytes().await.expect("receipt"), receipt);
    assert_eq!(
        payments(&second.url).balance("ivy").await,
        9_000,
        "0 double, 0 lost"
    );
}

/// A deploy stops the server (SIGTERM) in the middle of a debit: the debit
/// is answered and recorded, the process exits by itself, and the retry on
/// the restarted server gets the same receipt, debited once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payments_server_stopped_mid_debit_answers_it_and_exits_cleanly() {
    let db = idem_tests::sqlite_path("payments-sigterm");
    let mut first = start_on_file(&db, 1500, None).await;
    let client = payments(&first.url);
    let debit = tokio::spawn(async move { client.try_debit("jo", "stop-1", 1000).await });
    claimed_in_file(&db).await;
    signal(&first, "TERM");
    let answered = debit
        .await
        .expect("the debit's task")
        .expect("the running debit is answered, not cut off");
    assert_eq!(answered.status(), StatusCode::CREATED);
    let receipt = answered.bytes().await.expect("receipt");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = first.child.try_wait().expect("the process") {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server exits by itself after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "a clean exit: {status:?}");
    let second = start_on_file(&db, 0, None).await;
    let retried = payments(&second.url).debit("jo", "stop-1", 1000).await;
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert_eq!(retried.bytes().await.expect("receipt"), receipt, "replayed");
    assert_eq!(
        payments(&second.url).balance("jo").await,
        9_000,
        "one debit"
    );
}

/// A server allowed two debits at once answers a third and a fourth 503
/// with `Retry-After` at once, runs nothing for them, and runs them when
/// retried: each account debited once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payments_server_at_its_limit_answers_503_and_runs_the_retry_once() {
    let db = idem_tests::sqlite_path("payments-limit");
    let store = [
        ("PAYMENTS_DB", db.display().to_string()),
        ("MAX_IN_FLIGHT", "2".to_owned()),
    ];
    let server = start_on(&store, 1000, None).await;
    let running: Vec<_> = ["al", "bo"]
        .into_iter()
        .map(|account| {
            let client = payments(&server.url);
            tokio::spawn(async move { client.debit(account, "limit-1", 1000).await.status() })
        })
        .collect();
    claims_in_file(&db, 2).await;
    for account in ["cy", "di"] {
        let refused = payments(&server.url).debit(account, "limit-1", 1000).await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused.headers().contains_key(header::RETRY_AFTER),
            "{:?}",
            refused.headers()
        );
        let body = refused.text().await.expect("problem");
        assert!(body.contains("urn:idem:problem:overloaded"), "{body}");
    }
    for done in running {
        assert_eq!(done.await.expect("debit"), StatusCode::CREATED);
    }
    for account in ["cy", "di"] {
        let retried = payments(&server.url).debit(account, "limit-1", 1000).await;
        assert_eq!(
            retried.status(),
            StatusCode::CREATED,
            "run once room is back"
        );
    }
    for account in ["al", "bo", "cy", "di"] {
        assert_eq!(
            payments(&server.url).balance(account).await,
            9_000,
            "{account}"
        );
    }
}

/// Redis restarts under the payments service (a deploy of Redis, a crash
/// and its supervisor): the first balance read after it is answered, and
/// so is a retry of the debit before it, replayed from the record Redis
/// kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_redis_restart_the_first_read_is_answered() {
    let mut redis = idem_tests::PrivateRedis::start(true);
    let server = start_on(&[("REDIS_URL", redis.url())], 0, None).await;
    let client = payments(&server.url);
    let debited = client.debit("ed", "restart-r", 1000).await;
    assert_eq!(debited.status(), StatusCode::CREATED);
    redis.kill();
    redis.restart();
    assert_eq!(
        client.balance("ed").await,
        9_000,
        "the first read after the restart"
    );
    let retried = client.debit("ed", "restart-r", 1000).await;
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert!(retried.headers().contains_key("idempotent-replayed"));
}

/// The payments example behind a stock PgBouncer in transaction mode (no
/// `ignore_startup_parameters`), as the topologies page sets it up: it
/// starts, debits once, and replays the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_stock_pgbouncer_the_example_starts_and_debits_once() {
    let bouncer = idem_tests::PrivatePgBouncer::start_stock();
    let store = [
        ("DATABASE_URL", bouncer.url()),
        ("DATABASE_POOLER", "transaction".to_owned()),
        ("DATABASE_LISTEN_URL", database_url()),
        ("PG_SCHEMA", unique_schema()),
    ];
    let server = start_on(&store, 0, None).await;
    let client = payments(&server.url);
    let debited = client.debit("flo", "bouncer-1", 1000).await;
    assert_eq!(debited.status(), StatusCode::CREATED);
    let receipt = debited.bytes().await.expect("receipt");
    let retried = client.debit("flo", "bouncer-1", 1000).await;
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert_eq!(retried.bytes().await.expect("receipt"), receipt, "replayed");
    assert_eq!(client.balance("flo").await, 9_000, "one debit");
}
