//! `PgStore` beyond the conformance kit: exactly-once effects through
//! transactional completion, the migration, the purge, and statements per
//! request counted on the wire.

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Call, Engine, Error, Never, Outcome, Policy, Ran, Store};
use idem_postgres::PgStore;
use idem_tests::{pg_pool, pg_store, unique_schema, PgStatementCounter};
use sqlx::AssertSqlSafe;

fn call(key: &str) -> Call {
    idem_tests::call("pg-tests", key)
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum DebitError {
    LeaseLost,
    Database(String),
}

impl idem_core::Failure for DebitError {
    fn is_final(&self) -> bool {
        false
    }
}

impl std::fmt::Display for DebitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// One debit: the ledger row (when given a ledger table) and the record, in
/// one transaction.
async fn debit(
    store: &PgStore,
    claim: &idem_core::Claim,
    ledger: Option<&str>,
    holder: &str,
) -> Result<String, DebitError> {
    let db = |e: sqlx::Error| DebitError::Database(e.to_string());
    let mut tx = store.begin_transaction().await.map_err(db)?;
    if let Some(ledger) = ledger {
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {ledger} (holder, amount) VALUES ($1, 1000)"
        )))
        .bind(holder)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }
    let receipt = format!("debited by {holder}");
    // If the claim was lost, this fails and the transaction (with the
    // ledger row) is rolled back.
    let outcome = idem_core::encode_result(&Ok::<_, DebitError>(&receipt))
        .map_err(|e| DebitError::Database(e.to_string()))?;
    claim
        .commit(tx, &outcome)
        .await
        .map_err(|_| DebitError::LeaseLost)?;
    Ok(receipt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_holder_is_fenced_and_its_business_write_rolls_back() {
    let store = pg_store().await;
    let schema = store.schema().to_owned();
    let ledger = format!("\"{schema}\".ledger");
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {ledger} (holder text NOT NULL, amount bigint NOT NULL)"
    )))
    .execute(store.pool())
    .await
    .expect("ledger table");
    let lease = Duration::from_millis(300);
    let c = call("stall");

    // Holder A claims, then stalls past its lease (a GC pause, a partition)
    // before its transaction reaches the database. It runs with renewals cut
    // off by using the store directly, as a frozen process would.
    let a_lease = idem_tests::claim(&store, &c, lease).await;
    idem_tests::until_claim_lapsed(&store, c.record_id(), "holder A").await;

    // Holder B retries after the lease ran out: it takes over and commits.
    let b =
        Engine::new(store.clone()).with_policy(Policy::default().lease(Duration::from_secs(30)));
    let b_result = b
        .run(&c, |claim| {
            let store = store.clone();
            let ledger = ledger.clone();
            async move { debit(&store, &claim, Some(&ledger), "B").await }
        })
        .await
        .expect("B runs");
    assert_eq!(b_result, Ran::Executed("debited by B".to_string()));

    // A wakes up and tries to commit its debit with its record: refused.
    let db = |e: sqlx::Error| e.to_string();
    let mut tx = store.begin_transaction().await.map_err(db).expect("tx");
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {ledger} (holder, amount) VALUES ('A', 1000)"
    )))
    .execute(&mut *tx)
    .await
    .expect("A's business write, inside its transaction");
    let a_claim_outcome = Outcome::new(b"debited by A".to_vec());
    let refused = store
        .complete_in_transaction_with_lease(
            &mut tx,
            c.record_id(),
            &a_lease,
            &a_claim_outcome,
            Duration::from_mins(1),
        )
        .await;
    assert!(
        refused
            .as_ref()
            .is_err_and(idem_core::StoreError::is_lease_lost),
        "A must be fenced: {refused:?}"
    );
    drop(tx); // A's error path: the transaction rolls back.

    let rows: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT holder, amount FROM {ledger}"
    )))
    .fetch_all(store.pool())
    .await
    .expect("ledger");
    assert_eq!(
        rows,
        vec![("B".to_string(), 1000)],
        "the ledger shows one debit, B's"
    );
    // And retries replay B's receipt.
    let replay = b
        .run(&c, |_| async { Ok::<_, DebitError>("never".to_string()) })
        .await
        .expect("replay");
    assert_eq!(replay, Ran::Replayed("debited by B".to_string()));
}

#[tokio::test]
async fn transactional_completion_rolls_back_with_the_transaction() {
    let store = pg_store().await;
    let engine = Engine::new(store.clone());
    let c = call("rollback");
    let first = engine
        .run(&c, |claim| {
            let store = store.clone();
            async move {
                let tx = store
                    .begin_transaction()
                    .await
                    .map_err(|e| DebitError::Database(e.to_string()))?;
                // The business logic fails: roll back, nothing is recorded.
                claim.roll_back(tx).await;
                Err::<u8, _>(DebitError::Database("constraint violated".into()))
            }
        })
        .await;
    assert!(
        matches!(
            first,
            Err(Error::Failed(Ran::Executed(DebitError::Database(_))))
        ),
        "{first:?}"
    );
    // Nothing was recorded: a retry runs.
    let again = engine
        .run(&c, |_| async { Ok::<_, DebitError>(2u8) })
        .await
        .expect("retry");
    assert_eq!(again, Ran::Executed(2));
}

#[tokio::test]
async fn migration_runs_twice_and_concurrently() {
    let pool = pg_pool(8).await;
    let store = PgStore::new(pool)
        .with_schema(&unique_schema())
        .expect("name")
        .with_table("idem_records")
        .expect("name");
    store.migrate().await.expect("first");
    store.migrate().await.expect("second");
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.migrate().await })
        })
        .collect();
    for r in runs {
        r.await.expect("task").expect("concurrent migration");
    }
    assert!(store.migration_sql().contains("CREATE TABLE IF NOT EXISTS"));
    assert!(PgStore::new(store.pool().clone())
        .with_schema("bad-name; drop")
        .is_err());
    assert!(PgStore::new(store.pool().clone())
        .with_table("1abc")
        .is_err());
    // A store whose table does not exist says what to do.
    let missing = PgStore::new(store.pool().clone())
        .with_schema(&unique_schema())
        .expect("name");
    let c = call("missing");
    let err = missing
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
        .await
        .expect_err("no table");
    assert!(err.to_string().contains("migrate"), "{err}");
}

/// A table of the store's name made by something else (another library's
/// `records`) fails at start, saying so, and a request on it is refused as
/// corrupt, never run, and never a transient error retried forever.
#[tokio::test]
async fn a_postgres_table_made_by_something_else_fails_at_start_and_runs_nothing() {
    let pool = pg_pool(2).await;
    let schema = unique_schema();
    for statement in [
        format!("CREATE SCHEMA \"{schema}\""),
        format!("CREATE TABLE \"{schema}\".records (id bytea PRIMARY KEY, deadline timestamptz, payload text)"),
    ] {
        sqlx::query(AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .expect("the foreign table");
    }
    let store = PgStore::new(pool).with_schema(&schema).expect("name");
    let migrated = store.migrate().await.map_err(|e| e.to_string());
    assert!(
        migrated.as_ref().is_err_and(|e| e.contains("fingerprint")),
        "the migration checks the table's columns: {migrated:?}"
    );
    let c = call("foreign");
    let err = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
        .await
        .expect_err("a foreign table");
    assert_eq!(err.kind(), idem_core::StoreErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("not of the shape"), "{err}");
    let ran = Engine::new(store)
        .run(&c, |_| async {
            panic!("must not run on a store that cannot record")
        })
        .await
        .map(|r: Ran<u8>| r);
    assert!(matches!(ran, Err(Error::<Never>::Store(_))), "{ran:?}");
}

#[tokio::test]
async fn purge_deletes_expired_records_in_bounded_batches() {
    let trace = Duration::from_millis(300);
    let store = pg_store().await.with_expired_trace(trace);
    let ttl = Duration::from_millis(200);
    for i in 0..7 {
        let c = call(&format!("expire-{i}"));
        let l = idem_tests::claim(&store, &c, Duration::from_secs(30)).await;
        store
            .complete(c.record_id(), &l, &Outcome::new(vec![1]), ttl)
            .await
            .expect("complete");
    }
    let live = call("live");
    let l = idem_tests::claim(&store, &live, Duration::from_secs(30)).await;
    store
        .complete(
            live.record_id(),
            &l,
            &Outcome::new(vec![2]),
            Duration::from_hours(1),
        )
        .await
        .expect("complete");
    // Expired and traced: a late retry is refused, and nothing is purged.
    let last = call("expire-6");
    idem_tests::wait_until_expired(&store, &last).await;
    assert_eq!(store.purge_expired(5).await.expect("purge"), 0, "traced");
    // Once the traces have ended too.
    let probe = call("probe");
    let l = idem_tests::claim(&store, &probe, Duration::from_secs(30)).await;
    store
        .complete(probe.record_id(), &l, &Outcome::new(vec![3]), ttl)
        .await
        .expect("complete");
    idem_tests::wait_until_forgotten(&store, &probe).await;
    assert_eq!(
        store.purge_expired(5).await.expect("purge"),
        5,
        "at most the batch size"
    );
    assert_eq!(store.purge_expired(5).await.expect("purge"), 2, "the rest");
    assert_eq!(store.purge_expired(5).await.expect("purge"), 0);
    let count: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".records",
        store.schema()
    )))
    .fetch_one(store.pool())
    .await
    .expect("count");
    assert_eq!(count, 2, "the live record and the probe's new claim stay");
    assert!(matches!(
        store
            .begin(live.record_id(), live.fingerprint(), Duration::from_secs(1))
            .await,
        Ok(Begin::Replay(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_per_request_counted_on_the_wire() {
    // Migrate through a direct pool, then count the store's own statements
    // through the proxy.
    let direct = pg_store().await;
    let proxy = PgStatementCounter::start("127.0.0.1:5432").await;
    let url = format!("postgres://postgres@{}/test?sslmode=disable", proxy.addr);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .test_before_acquire(false)
        .connect(&url)
        .await
        .expect("pool through the proxy");
    let store = PgStore::new(pool)
        .with_schema(direct.schema())
        .expect("name");
    let engine = Engine::new(store.clone());

    let before = proxy.executed();
    engine
        .run(&call("first"), |_| async { Ok::<_, Never>(1) })
        .await
        .expect("first");
    assert_eq!(
        proxy.executed() - before,
        2,
        "a first request: begin and complete"
    );

    let before = proxy.executed();
    let replay = engine
        .run(&call("first"), |_| async { Ok::<_, Never>(1) })
        .await
        .expect("replay");
    assert!(replay.is_replayed());
    assert_eq!(proxy.executed() - before, 1, "a replay: begin");

    let held = call("held");
    let _ = idem_tests::claim(&store, &held, Duration::from_mins(1)).await;
    let before = proxy.executed();
    let dup = engine.run(&held, |_| async { Ok::<_, Never>(2) }).await;
    assert!(matches!(dup, Err(Error::InFlight { .. })), "{dup:?}");
    assert_eq!(proxy.executed() - before, 1, "a duplicate in flight: begin");

    // Completed inside the operation's transaction: the engine adds nothing
    // after the commit (begin, BEGIN, complete, COMMIT).
    let before = proxy.executed();
    let ran = engine
        .run(&call("in-tx"), |claim| {
            let store = store.clone();
            async move { debit(&store, &claim, None, "C").await }
        })
        .await
        .expect("in-transaction completion");
    assert_eq!(ran, Ran::Executed("debited by C".to_string()));
    assert_eq!(
        proxy.executed() - before,
        4,
        "completed in the transaction: begin, BEGIN, complete, COMMIT"
    );
    let before = proxy.executed();
    let replay = engine
        .run(&call("in-tx"), |_| async {
            Ok::<_, DebitError>("never".to_string())
        })
        .await
        .expect("replay of the in-transaction completion");
    assert_eq!(replay, Ran::Replayed("debited by C".to_string()));
    assert_eq!(proxy.executed() - before, 1, "its replay: begin");
}
