//! `MySqlStore` on the real MariaDB, beyond the conformance kit: one debit
//! under 64 concurrent duplicates (and the seed design's deadlock beside
//! it), debits committed with their records, holders that lost their claim,
//! a commit whose connection dies, errors that say what went wrong, the
//! migration and the purge.

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{
    Call, Engine, Error, OnInFlight, Outcome, Policy, Ran, Removal, Store, StoreErrorKind,
};
use idem_mysql::MySqlStore;
use idem_tests::{mysql_pool, mysql_store, mysql_store_on, unique_table};
use sqlx::{AssertSqlSafe, Row};

use idem_tests::DebitError;

fn call(key: &str) -> Call {
    idem_tests::call("mysql-tests", key)
}

/// A ledger table beside the store's: one row per debit.
async fn ledger(store: &MySqlStore) -> String {
    let ledger = format!("{}_ledger", store.table());
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE `{ledger}` (holder VARCHAR(32) NOT NULL, amount BIGINT NOT NULL) ENGINE = InnoDB"
    )))
    .execute(store.pool())
    .await
    .expect("ledger table");
    ledger
}

async fn debits(store: &MySqlStore, ledger: &str) -> Vec<(String, i64)> {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT holder, amount FROM `{ledger}` ORDER BY holder"
    )))
    .fetch_all(store.pool())
    .await
    .expect("ledger")
}

/// One debit: the ledger row and the record, in one transaction.
async fn debit(
    store: &MySqlStore,
    claim: &idem_core::Claim,
    ledger: &str,
    holder: &str,
) -> Result<String, DebitError> {
    let db = |e: sqlx::Error| DebitError::Database(e.to_string());
    let mut tx = store.begin_transaction().await.map_err(db)?;
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO `{ledger}` (holder, amount) VALUES (?, 1000)"
    )))
    .bind(holder)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    let receipt = format!("debited by {holder}");
    let outcome = idem_core::encode_result(&Ok::<_, DebitError>(&receipt))
        .map_err(|e| DebitError::Database(e.to_string()))?;
    claim.commit(tx, &outcome).await.map_err(DebitError::from)?;
    Ok(receipt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_duplicates_of_a_debit_debit_once_and_all_get_its_receipt() {
    let store = mysql_store_on(mysql_pool(16).await).await;
    let ledger = ledger(&store).await;
    let engine = Engine::new(store.clone()).with_policy(
        Policy::default()
            .lease(Duration::from_secs(30))
            .on_in_flight(OnInFlight::Wait {
                max: Duration::from_secs(30),
            }),
    );
    let c = call("sixty-four");
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (engine, store, ledger, c) =
                (engine.clone(), store.clone(), ledger.clone(), c.clone());
            tokio::spawn(async move {
                engine
                    .run(&c, |claim| async move {
                        debit(&store, &claim, &ledger, &format!("d{i}")).await
                    })
                    .await
            })
        })
        .collect();
    let mut executed = Vec::new();
    let mut replayed = Vec::new();
    for task in tasks {
        match task.await.expect("task") {
            Ok(Ran::Executed(receipt)) => executed.push(receipt),
            Ok(Ran::Replayed(receipt)) => replayed.push(receipt),
            other => panic!("every duplicate gets the receipt, got {other:?}"),
        }
    }
    assert_eq!(executed.len(), 1, "one execution");
    assert_eq!(replayed.len(), 63);
    assert!(replayed.iter().all(|r| *r == executed[0]), "byte-identical");
    let rows = debits(&store, &ledger).await;
    assert_eq!(rows.len(), 1, "one debit: {rows:?}");
    assert_eq!(format!("debited by {}", rows[0].0), executed[0]);
}

/// The design this project started from, on InnoDB: `SELECT ... FOR
/// UPDATE` on the key, then `INSERT` when there is no row. Two first
/// requests for one new key both take the gap's lock (gap locks never
/// conflict), then each insert waits for the other's gap lock: the server
/// kills one as a deadlock (1213). A test of that design, not of idem:
/// idem's claim is one `INSERT ... ON DUPLICATE KEY UPDATE` (above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_designs_two_first_requests_deadlock() {
    let store = mysql_store().await;
    let t = store.table().to_owned();
    let pool = store.pool().clone();
    // A record beside the new key, so the gap is bounded (as in a table in use).
    let neighbour = call("neighbour");
    idem_tests::claim(&store, &neighbour, Duration::from_secs(30)).await;
    let id = call("new-key").record_id().as_bytes().to_vec();
    let mut a = pool.begin().await.expect("a");
    let mut b = pool.begin().await.expect("b");
    let select = format!("SELECT token FROM `{t}` WHERE id = ? FOR UPDATE");
    for tx in [&mut a, &mut b] {
        let row = sqlx::query(AssertSqlSafe(select.clone()))
            .bind(&id)
            .fetch_optional(&mut **tx)
            .await
            .expect("both take the gap lock: they do not conflict");
        assert!(row.is_none(), "a new key");
    }
    let insert = format!(
        "INSERT INTO `{t}` (id, fingerprint, token, completed, deadline) \
         VALUES (?, ?, 1, 0, UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)"
    );
    let (ins_a, ins_b) = (insert.clone(), insert);
    let (id_a, id_b) = (id.clone(), id.clone());
    let first = tokio::spawn(async move {
        let r = sqlx::query(AssertSqlSafe(ins_a))
            .bind(&id_a)
            .bind(&id_a)
            .execute(&mut *a)
            .await;
        (r.map(|_| ()), a)
    });
    let second = tokio::spawn(async move {
        let r = sqlx::query(AssertSqlSafe(ins_b))
            .bind(&id_b)
            .bind(&id_b)
            .execute(&mut *b)
            .await;
        (r.map(|_| ()), b)
    });
    let (first, second) = (first.await.expect("a"), second.await.expect("b"));
    let deadlocked = [&first.0, &second.0]
        .iter()
        .filter(|r| {
            r.as_ref().is_err_and(|e| match e {
                sqlx::Error::Database(db) => db.message().contains("Deadlock"),
                _ => false,
            })
        })
        .count();
    assert_eq!(
        deadlocked, 1,
        "one of the two first requests is killed as a deadlock: {:?} / {:?}",
        first.0, second.0
    );
}

#[tokio::test]
async fn a_debit_and_its_receipt_commit_together() {
    let store = mysql_store().await;
    let ledger = ledger(&store).await;
    let engine = Engine::new(store.clone());
    let c = call("together");
    let first = engine
        .run(&c, |claim| {
            let (store, ledger) = (store.clone(), ledger.clone());
            async move { debit(&store, &claim, &ledger, "A").await }
        })
        .await
        .expect("first");
    assert_eq!(first, Ran::Executed("debited by A".to_owned()));
    let again = engine
        .run(&c, |claim| {
            let (store, ledger) = (store.clone(), ledger.clone());
            async move { debit(&store, &claim, &ledger, "B").await }
        })
        .await
        .expect("retry");
    assert_eq!(again, Ran::Replayed("debited by A".to_owned()));
    assert_eq!(debits(&store, &ledger).await, vec![("A".to_owned(), 1000)]);
}

#[tokio::test]
async fn a_failed_debit_records_nothing_and_its_retry_runs() {
    let store = mysql_store().await;
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
                claim.roll_back(tx).await;
                Err::<u8, _>(DebitError::Database(
                    "insufficient funds check failed".into(),
                ))
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
    let again = engine
        .run(&c, |_| async { Ok::<_, DebitError>(2u8) })
        .await
        .expect("retry");
    assert_eq!(again, Ran::Executed(2));
}

/// Holder A claims, then freezes past its lease before its transaction
/// reaches the database; B takes over and debits. A's debit, committed with
/// its record, is refused and rolled back: one debit, B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_lease_debits_nothing() {
    let store = mysql_store().await;
    let ledger = ledger(&store).await;
    let lease = Duration::from_millis(300);
    let c = call("frozen");
    let a_lease = idem_tests::claim(&store, &c, lease).await;
    // Until A's lease has ended by the server's clock.
    while store
        .inspect(c.record_id())
        .await
        .expect("inspect")
        .is_some()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b =
        Engine::new(store.clone()).with_policy(Policy::default().lease(Duration::from_secs(30)));
    let b_result = b
        .run(&c, |claim| {
            let (store, ledger) = (store.clone(), ledger.clone());
            async move { debit(&store, &claim, &ledger, "B").await }
        })
        .await
        .expect("B runs");
    assert_eq!(b_result, Ran::Executed("debited by B".to_owned()));
    assert_fenced(&store, &ledger, &c, &a_lease).await;
    assert_eq!(debits(&store, &ledger).await, vec![("B".to_owned(), 1000)]);
}

/// An operator removes a stuck claim by force while its holder still runs;
/// the holder's debit is then refused, and the retry debits once.
#[tokio::test]
async fn a_holder_whose_claim_was_removed_by_force_debits_nothing() {
    let store = mysql_store().await;
    let ledger = ledger(&store).await;
    let c = call("removed");
    let a_lease = idem_tests::claim(&store, &c, Duration::from_secs(30)).await;
    assert_eq!(
        store.remove(c.record_id(), false).await.expect("remove"),
        Removal::RefusedInFlight,
        "refused without force"
    );
    assert_eq!(
        store.remove(c.record_id(), true).await.expect("remove"),
        Removal::Removed
    );
    let retry = Engine::new(store.clone())
        .run(&c, |claim| {
            let (store, ledger) = (store.clone(), ledger.clone());
            async move { debit(&store, &claim, &ledger, "retry").await }
        })
        .await
        .expect("the retry runs");
    assert_eq!(retry, Ran::Executed("debited by retry".to_owned()));
    assert_fenced(&store, &ledger, &c, &a_lease).await;
    assert_eq!(
        debits(&store, &ledger).await,
        vec![("retry".to_owned(), 1000)]
    );
}

/// A writes its debit in its transaction and tries to complete with its old
/// lease: refused as lost; its transaction is rolled back.
async fn assert_fenced(store: &MySqlStore, ledger: &str, c: &Call, lease: &idem_core::Lease) {
    let mut tx = store.begin_transaction().await.expect("tx");
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO `{ledger}` (holder, amount) VALUES ('A', 1000)"
    )))
    .execute(&mut *tx)
    .await
    .expect("A's write, in its transaction");
    let refused = store
        .complete_in_transaction_with_lease(
            &mut tx,
            c.record_id(),
            lease,
            &Outcome::new(b"debited by A".to_vec()),
            Duration::from_mins(1),
        )
        .await;
    assert!(
        refused
            .as_ref()
            .is_err_and(idem_core::StoreError::is_lease_lost),
        "A must be fenced: {refused:?}"
    );
    tx.rollback().await.expect("rollback");
}

/// A transaction whose connection the server kills (`KILL`) after the
/// record's completion, just before the `COMMIT` is sent.
struct KilledAtCommit {
    tx: idem_mysql::MySqlTransaction,
    connection: u64,
    pool: sqlx::MySqlPool,
}

impl KilledAtCommit {
    async fn new(
        mut tx: idem_mysql::MySqlTransaction,
        pool: sqlx::MySqlPool,
    ) -> Result<Self, sqlx::Error> {
        let connection = sqlx::query_scalar("SELECT CONNECTION_ID()")
            .fetch_one(&mut *tx)
            .await?;
        Ok(Self {
            tx,
            connection,
            pool,
        })
    }
}

#[idem_core::store::async_trait]
impl idem_core::StoreTransaction for KilledAtCommit {
    async fn complete(
        &mut self,
        id: &idem_core::RecordId,
        lease: &idem_core::Lease,
        outcome: &Outcome,
        ttl: std::time::Duration,
    ) -> Result<(), idem_core::StoreError> {
        self.tx.complete(id, lease, outcome, ttl).await
    }

    async fn commit(self) -> Result<(), idem_core::StoreError> {
        sqlx::query(AssertSqlSafe(format!("KILL {}", self.connection)))
            .execute(&self.pool)
            .await
            .expect("KILL");
        idem_core::StoreTransaction::commit(self.tx).await
    }

    async fn rollback(self) -> Result<(), idem_core::StoreError> {
        idem_core::StoreTransaction::rollback(self.tx).await
    }
}

/// The connection dies between the completion and its COMMIT (killed by
/// the server's `KILL`): whether the debit committed is unknown to
/// the holder, so the claim is kept until its lease ends (a retry meanwhile
/// is told it is in flight), then the retry debits once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_whose_commit_is_cut_off_keeps_its_claim_then_runs_once() {
    let store = mysql_store().await;
    let ledger = ledger(&store).await;
    let lease = Duration::from_secs(2);
    let engine = Engine::new(store.clone()).with_policy(Policy::default().lease(lease));
    let c = call("cut-off");
    let first = engine
        .run(&c, |claim| {
            let (store, ledger) = (store.clone(), ledger.clone());
            async move {
                let db = |e: sqlx::Error| DebitError::Database(e.to_string());
                let mut tx = store.begin_transaction().await.map_err(db)?;
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO `{ledger}` (holder, amount) VALUES ('first', 1000)"
                )))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
                let outcome = idem_core::encode_result(&Ok::<_, DebitError>("debited by first"))
                    .map_err(|e| DebitError::Database(e.to_string()))?;
                let tx = KilledAtCommit::new(tx, store.pool().clone())
                    .await
                    .map_err(db)?;
                claim.commit(tx, &outcome).await.map_err(DebitError::from)?;
                Ok("debited by first".to_owned())
            }
        })
        .await;
    assert!(
        matches!(
            first,
            Err(Error::Failed(Ran::Executed(DebitError::Uncertain)))
        ),
        "{first:?}"
    );
    assert!(
        debits(&store, &ledger).await.is_empty(),
        "the server rolled it back"
    );
    let during = engine
        .run(&c, |_| async { Ok::<_, DebitError>("never".to_owned()) })
        .await;
    assert!(matches!(during, Err(Error::InFlight { .. })), "{during:?}");
    // Once the lease has ended, the retry runs, once.
    let retry = loop {
        let r = engine
            .run(&c, |claim| {
                let (store, ledger) = (store.clone(), ledger.clone());
                async move { debit(&store, &claim, &ledger, "retry").await }
            })
            .await;
        match r {
            Err(Error::InFlight { retry_after }) => {
                tokio::time::sleep(retry_after.max(Duration::from_millis(10))).await;
            }
            other => break other,
        }
    };
    assert_eq!(
        retry.expect("retry"),
        Ran::Executed("debited by retry".to_owned())
    );
    assert_eq!(
        debits(&store, &ledger).await,
        vec![("retry".to_owned(), 1000)]
    );
}

#[tokio::test]
async fn migration_runs_twice_and_concurrently() {
    let store = MySqlStore::new(mysql_pool(8).await)
        .with_table(&unique_table())
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
    for bad in ["bad-name; drop", "1abc", "Records", "a`b"] {
        assert!(MySqlStore::new(store.pool().clone())
            .with_table(bad)
            .is_err());
        assert!(MySqlStore::new(store.pool().clone())
            .with_database(bad)
            .is_err());
    }
    // The database named explicitly reaches the same table.
    let database: String = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(store.pool())
        .await
        .expect("database");
    let named = store
        .clone()
        .with_database(&database)
        .expect("name")
        .with_table(store.table())
        .expect("name");
    let c = call("named");
    let l = idem_tests::claim(&store, &c, Duration::from_secs(30)).await;
    assert!(named
        .inspect(c.record_id())
        .await
        .expect("inspect")
        .is_some());
    store.release(c.record_id(), &l).await.expect("release");
}

#[tokio::test]
async fn a_missing_or_foreign_table_is_a_clear_error_and_nothing_runs() {
    let pool = mysql_pool(4).await;
    let c = call("missing");
    let missing = MySqlStore::new(pool.clone())
        .with_table(&unique_table())
        .expect("name");
    let err = missing
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
        .await
        .expect_err("no table");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("run MySqlStore::migrate"), "{err}");
    // A table of the same name made by something else.
    let foreign = unique_table();
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE `{foreign}` (id BINARY(32) PRIMARY KEY, payload TEXT)"
    )))
    .execute(&pool)
    .await
    .expect("foreign table");
    let store = MySqlStore::new(pool.clone())
        .with_table(&foreign)
        .expect("name");
    let migrated = store.migrate().await;
    assert!(migrated.is_err(), "the migration checks the table's shape");
    let err = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
        .await
        .expect_err("foreign table");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("not of the shape"), "{err}");
    let engine = Engine::new(store);
    let ran = engine
        .run(&c, |_| async {
            panic!("must not run on a store that cannot record")
        })
        .await
        .map(|r: Ran<u8>| r);
    assert!(
        matches!(ran, Err(Error::<idem_core::Never>::Store(_))),
        "{ran:?}"
    );
}

/// Another transaction holds the record's row (a long report, a stuck
/// session) past the server's `innodb_lock_wait_timeout`: the claim fails as
/// a transient error that names the lock, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_locked_past_the_lock_wait_timeout_is_a_transient_error() {
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query("SET SESSION innodb_lock_wait_timeout = 1")
                    .execute(conn)
                    .await
                    .map(|_| ())
            })
        })
        .connect(&idem_tests::mysql_url())
        .await
        .expect("pool");
    let store = mysql_store_on(pool).await;
    let c = call("locked");
    let lease = idem_tests::claim(&store, &c, Duration::from_millis(100)).await;
    let mut locker = store.pool().begin().await.expect("locker");
    sqlx::query(AssertSqlSafe(format!(
        "SELECT token FROM `{}` WHERE id = ? FOR UPDATE",
        store.table()
    )))
    .bind(&c.record_id().as_bytes()[..])
    .fetch_one(&mut *locker)
    .await
    .expect("lock the row");
    let begin = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
        .await;
    let err = begin.expect_err("the row is locked");
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(err.is_transient());
    assert!(
        err.to_string().contains("innodb_lock_wait_timeout"),
        "{err}"
    );
    locker.rollback().await.expect("unlock");
    // Once unlocked, the store answers again: the lease is still A's.
    let again = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(1))
        .await
        .expect("answers");
    assert!(
        matches!(again, Begin::InFlight { .. } | Begin::Acquired(_)),
        "{again:?}"
    );
    let _ = lease;
}

#[tokio::test]
async fn expired_records_are_purged_in_bounded_batches() {
    let store = mysql_store()
        .await
        .with_expired_trace(Duration::from_millis(300));
    let ttl = Duration::from_millis(200);
    let mut last = None;
    for i in 0..7 {
        let c = call(&format!("expire-{i}"));
        let l = idem_tests::claim(&store, &c, Duration::from_secs(30)).await;
        store
            .complete(c.record_id(), &l, &Outcome::new(vec![1]), ttl)
            .await
            .expect("complete");
        last = Some(c);
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
    let last = last.expect("seven");
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
        "at most the batch"
    );
    assert_eq!(store.purge_expired(5).await.expect("purge"), 2, "the rest");
    assert_eq!(store.purge_expired(5).await.expect("purge"), 0);
    let count: i64 = sqlx::query(AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM `{}`",
        store.table()
    )))
    .fetch_one(store.pool())
    .await
    .expect("count")
    .get(0);
    assert_eq!(count, 2, "the live record and the probe's new claim stay");
    assert!(matches!(
        store
            .begin(live.record_id(), live.fingerprint(), Duration::from_secs(1))
            .await,
        Ok(Begin::Replay(_))
    ));
}

/// The server turns read-only (a primary being switched over, a replica
/// promoted late): a claim fails as a transient error that says so, nothing
/// runs, and once the server is writable the retry runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_refuses_claims_as_transient_and_nothing_runs() {
    let db = idem_tests::PrivateMariaDb::start();
    let admin = sqlx::MySqlPool::connect(&db.url()).await.expect("admin");
    // `read_only` binds users without the right to ignore it: the service's.
    for statement in [
        "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'app'",
        "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON test.* TO 'app'@'127.0.0.1'",
    ] {
        sqlx::query(statement)
            .execute(&admin)
            .await
            .expect(statement);
    }
    let url = db.url().replacen("root@", "app:app@", 1);
    let store = MySqlStore::new(sqlx::MySqlPool::connect(&url).await.expect("app"));
    store.migrate().await.expect("migrate");
    sqlx::query("SET GLOBAL read_only = ON")
        .execute(&admin)
        .await
        .expect("read-only");
    let engine = Engine::new(store.clone());
    let c = call("read-only");
    let refused = engine
        .run(&c, |_| async {
            panic!("must not run on a read-only server")
        })
        .await
        .map(|r: Ran<u8>| r);
    let Err(Error::<idem_core::Never>::Store(err)) = refused else {
        panic!("a store error, got {refused:?}");
    };
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    sqlx::query("SET GLOBAL read_only = OFF")
        .execute(&admin)
        .await
        .expect("writable");
    let ran = engine
        .run(&c, |_| async { Ok::<_, DebitError>(7u8) })
        .await
        .expect("runs once writable");
    assert_eq!(ran, Ran::Executed(7));
}

#[tokio::test]
async fn the_background_purger_drains_expired_records_in_batches() {
    let store = mysql_store()
        .await
        .with_expired_trace(Duration::from_millis(100));
    let ttl = Duration::from_millis(100);
    for i in 0..5 {
        let c = call(&format!("bg-{i}"));
        let l = idem_tests::claim(&store, &c, Duration::from_secs(30)).await;
        store
            .complete(c.record_id(), &l, &Outcome::new(vec![1]), ttl)
            .await
            .expect("complete");
    }
    let purger = store.spawn_purger(Duration::from_millis(50), 2);
    let count = || async {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM `{}`",
            store.table()
        )))
        .fetch_one(store.pool())
        .await
        .expect("count")
        .get::<i64, _>(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while count().await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the purger left expired records"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    purger.abort();
}
