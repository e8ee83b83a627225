//! `SqliteStore` on real SQLite files, beyond the conformance kit: one
//! debit under 64 concurrent duplicates, in one process and across two on
//! one file, debits committed with their records, a holder that froze past
//! its lease, a database locked past the busy timeout, and each bad file
//! failing at start with a message that says which.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Call, Engine, Error, OnInFlight, Policy, Ran, Store, StoreErrorKind};
use idem_sqlite::SqliteStore;
use idem_tests::second_process::SecondProcess;
use idem_tests::{sqlite_path, sqlite_store};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::AssertSqlSafe;

use idem_tests::DebitError;

fn call(key: &str) -> Call {
    idem_tests::call("sqlite-tests", key)
}

/// The ledger beside the store's table: one row per debit.
async fn ledger(store: &SqliteStore) {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS ledger (holder TEXT NOT NULL, amount INTEGER NOT NULL)",
    )
    .execute(store.pool())
    .await
    .expect("ledger table");
}

async fn debits(store: &SqliteStore) -> Vec<(String, i64)> {
    sqlx::query_as("SELECT holder, amount FROM ledger ORDER BY holder")
        .fetch_all(store.pool())
        .await
        .expect("ledger")
}

/// One debit: the ledger row and the record, in one transaction.
async fn debit(
    store: &SqliteStore,
    claim: &idem_core::Claim,
    holder: &str,
) -> Result<String, DebitError> {
    let db = |e: sqlx::Error| DebitError::Database(e.to_string());
    let mut tx = store.begin_transaction().await.map_err(db)?;
    sqlx::query("INSERT INTO ledger (holder, amount) VALUES (?, 1000)")
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

fn waiting_engine(store: &SqliteStore) -> Engine {
    Engine::new(store.clone()).with_policy(
        Policy::default()
            .lease(Duration::from_secs(30))
            .on_in_flight(OnInFlight::Wait {
                max: Duration::from_secs(30),
            }),
    )
}

/// Runs `n` duplicates of the debit `key` at once; (executed, replayed).
async fn duplicates(store: &SqliteStore, key: &str, n: usize, who: &str) -> (usize, usize) {
    let store = store.clone();
    idem_tests::run_duplicates(
        &waiting_engine(&store),
        &call(key),
        n,
        who,
        move |claim, holder| {
            let store = store.clone();
            async move { debit(&store, &claim, &holder).await }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_duplicates_of_a_debit_debit_once_and_all_get_its_receipt() {
    let store = sqlite_store().await;
    ledger(&store).await;
    let (executed, replayed) = duplicates(&store, "sixty-four", 64, "d").await;
    assert_eq!((executed, replayed), (1, 63));
    assert_eq!(debits(&store).await.len(), 1, "one debit");
}

/// The second process of the test below: opens the file it is given, says
/// it is ready, waits for the word, runs 32 duplicates and prints what it
/// got. Run only by that test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of a_debit_asked_64_times_by_two_processes_on_one_file_runs_once"]
async fn second_process_on_the_same_file() {
    let Some(path) = std::env::var_os("IDEM_SQLITE_SHARED_FILE") else {
        return;
    };
    let store = SqliteStore::open(&path).await.expect("the shared file");
    idem_tests::second_process::ready_then_wait();
    let (executed, replayed) = duplicates(&store, "two-processes", 32, "child").await;
    idem_tests::second_process::report(executed, replayed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_asked_64_times_by_two_processes_on_one_file_runs_once() {
    let path = sqlite_path("two-processes");
    let store = SqliteStore::open(&path).await.expect("store");
    ledger(&store).await;
    let file = path.display().to_string();
    let mut second = SecondProcess::start(
        "second_process_on_the_same_file",
        &[("IDEM_SQLITE_SHARED_FILE", &file)],
    );
    second.go();
    let (here, here_replayed) = duplicates(&store, "two-processes", 32, "parent").await;
    let (there, there_replayed) = second.counts().await;
    assert_eq!(here + there, 1, "one execution in both processes");
    assert_eq!(here_replayed + there_replayed, 63, "63 receipts replayed");
    assert_eq!(debits(&store).await.len(), 1, "one debit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_lease_debits_nothing() {
    let store = sqlite_store().await;
    ledger(&store).await;
    let c = call("frozen");
    // The frozen holder: its claim of 50 ms runs out while it is stopped.
    let frozen = idem_tests::claim(&store, &c, Duration::from_millis(50)).await;
    // The retry that takes the record over once the lease is gone.
    let taken = loop {
        match store
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
            .await
        {
            Ok(Begin::Acquired(lease)) => break lease,
            Ok(Begin::InFlight { .. }) => tokio::task::yield_now().await,
            other => panic!("the retry waits for the lease, got {other:?}"),
        }
    };
    assert!(
        taken.token > frozen.token,
        "the new claim's token is greater"
    );
    // The frozen holder wakes and debits in its transaction: refused.
    let mut tx = store.begin_transaction().await.expect("tx");
    sqlx::query("INSERT INTO ledger (holder, amount) VALUES ('frozen', 1000)")
        .execute(&mut *tx)
        .await
        .expect("insert");
    let outcome = idem_core::Outcome::new(b"debited by frozen".to_vec());
    let refused = store
        .complete_in_transaction_with_lease(
            &mut tx,
            c.record_id(),
            &frozen,
            &outcome,
            Duration::from_mins(1),
        )
        .await
        .expect_err("the frozen holder's completion is refused");
    assert_eq!(refused.kind(), StoreErrorKind::LeaseLost, "{refused}");
    tx.rollback().await.expect("rollback");
    assert!(
        debits(&store).await.is_empty(),
        "the frozen holder debited nothing"
    );
    // The holder that took over records its debit.
    store
        .complete(
            c.record_id(),
            &taken,
            &idem_core::Outcome::new(b"ok".to_vec()),
            Duration::from_mins(1),
        )
        .await
        .expect("the new holder records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_whose_caller_went_away_mid_transaction_lands_once_when_retried() {
    let store = sqlite_store().await;
    ledger(&store).await;
    let engine = Engine::new(store.clone()).with_policy(
        Policy::default()
            .lease(Duration::from_millis(300))
            .on_in_flight(OnInFlight::Wait {
                max: Duration::from_secs(10),
            }),
    );
    let c = call("gone");
    let (inside, written) = tokio::sync::oneshot::channel::<()>();
    // The first attempt writes its debit inside its transaction, then its
    // caller goes away (a client that hung up) before the commit.
    let first = {
        let (engine, store, c) = (engine.clone(), store.clone(), c.clone());
        tokio::spawn(async move {
            engine
                .run(&c, |_claim| async move {
                    let db = |e: sqlx::Error| DebitError::Database(e.to_string());
                    let mut tx = store.begin_transaction().await.map_err(db)?;
                    sqlx::query("INSERT INTO ledger (holder, amount) VALUES ('first', 1000)")
                        .execute(&mut *tx)
                        .await
                        .map_err(db)?;
                    let _ = inside.send(());
                    std::future::pending::<()>().await;
                    Ok::<_, DebitError>("never".to_owned())
                })
                .await
        })
    };
    written.await.expect("the first attempt wrote its debit");
    first.abort();
    assert!(
        first.await.is_err_and(|e| e.is_cancelled()),
        "the caller went away"
    );
    // The retry waits out the dropped attempt's claim, then debits once.
    let retried = engine
        .run(&c, |claim| {
            let store = store.clone();
            async move { debit(&store, &claim, "retry").await }
        })
        .await;
    assert_eq!(
        retried.expect("the retry"),
        Ran::Executed("debited by retry".to_owned())
    );
    assert_eq!(
        debits(&store).await,
        vec![("retry".to_owned(), 1000)],
        "one debit, the retry's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_past_the_busy_timeout_answers_try_again_and_runs_nothing() {
    let path = sqlite_path("locked");
    let store = SqliteStore::open_with(
        SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_millis(200)),
    )
    .await
    .expect("store");
    // Another writer (another process's, to SQLite) holds the write lock.
    let other = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(SqliteConnectOptions::new().filename(&path))
        .await
        .expect("another connection");
    let blocker = other
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("the write lock");
    let ran = Arc::new(AtomicUsize::new(0));
    let engine = Engine::new(store.clone());
    let c = call("locked");
    let run = |ran: Arc<AtomicUsize>| async move {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok::<_, DebitError>("debited".to_owned())
    };
    let refused = engine
        .run(&c, |_claim| run(Arc::clone(&ran)))
        .await
        .expect_err("refused while locked");
    match &refused {
        Error::Store(e) => {
            assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
            assert!(e.is_transient(), "a retry may succeed: {e}");
            assert!(
                e.to_string().contains("locked past the busy timeout"),
                "{e}"
            );
        }
        other => panic!("a store error, got {other:?}"),
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0, "nothing ran");
    blocker.rollback().await.expect("the lock released");
    let done = engine.run(&c, |_claim| run(Arc::clone(&ran))).await;
    assert_eq!(
        done.expect("runs once unlocked"),
        Ran::Executed("debited".to_owned())
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_missing_directory_fails_at_start_and_names_it() {
    let dir = sqlite_path("missing-dir");
    let path = dir.join("payments.db");
    let e = SqliteStore::open(&path).await.expect_err("no directory");
    let said = e.to_string();
    assert!(said.contains(&path.display().to_string()), "{said}");
    assert!(said.contains("does not exist"), "{said}");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_fails_at_start() {
    let path = sqlite_path("not-a-database");
    std::fs::write(
        &path,
        b"these are someone's notes, not a database; ".repeat(200),
    )
    .expect("file");
    let said = SqliteStore::open(&path)
        .await
        .expect_err("not a database")
        .to_string();
    assert!(said.contains("not a SQLite database"), "{said}");
    let notes = std::fs::read(&path).expect("file");
    assert!(
        notes.starts_with(b"these are someone's notes"),
        "the file is left as it was"
    );
}

#[tokio::test]
async fn a_table_of_the_same_name_made_by_something_else_fails_at_start() {
    let path = sqlite_path("foreign-table");
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .connect_with(
            SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true),
        )
        .await
        .expect("pool");
    sqlx::query("CREATE TABLE idem_records (id TEXT PRIMARY KEY, payload TEXT)")
        .execute(&pool)
        .await
        .expect("someone else's table");
    let said = SqliteStore::open(&path)
        .await
        .expect_err("a foreign table")
        .to_string();
    assert!(said.contains("not made by SqliteStore::migrate"), "{said}");
    assert!(said.contains("no such column"), "{said}");
}

#[tokio::test]
async fn a_database_that_cannot_be_written_fails_at_start() {
    let path = sqlite_path("read-only");
    drop(SqliteStore::open(&path).await.expect("made once"));
    let said = SqliteStore::open_with(SqliteConnectOptions::new().filename(&path).read_only(true))
        .await
        .expect_err("read-only")
        .to_string();
    assert!(said.contains("cannot be written"), "{said}");
}

#[tokio::test]
async fn a_record_written_by_a_newer_version_is_refused_not_misread() {
    let store = sqlite_store().await;
    let c = call("newer");
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO \"{}\" (id, fingerprint, token, completed, deadline, outcome, format) \
         VALUES (?, ?, 1, 1, 9999999999999999, x'00', 2)",
        store.table()
    )))
    .bind(&c.record_id().as_bytes()[..])
    .bind(&c.fingerprint().as_bytes()[..])
    .execute(store.pool())
    .await
    .expect("a newer row");
    let e = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), StoreErrorKind::NewerFormat, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_refuses_the_record_as_full_and_keeps_what_it_had() {
    let path = sqlite_path("full");
    let store = SqliteStore::open_with(
        SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            // SQLITE_FULL as a full disk gives it: at 64 pages of 4 KiB.
            .pragma("max_page_count", "64"),
    )
    .await
    .expect("store");
    let big = idem_core::Outcome::new(vec![7_u8; 64 * 1024]);
    let mut full = None;
    for i in 0..64 {
        let c = call(&format!("full-{i}"));
        let lease = match store
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
            .await
        {
            Ok(Begin::Acquired(lease)) => lease,
            Err(e) => {
                full = Some(e);
                break;
            }
            other => panic!("a new key, got {other:?}"),
        };
        if let Err(e) = store
            .complete(c.record_id(), &lease, &big, Duration::from_mins(1))
            .await
        {
            full = Some(e);
            break;
        }
    }
    let e = full.expect("the database fills up");
    assert_eq!(e.kind(), StoreErrorKind::Full, "{e}");
    assert!(e.to_string().contains("full"), "{e}");
    // What was recorded before is still replayed.
    let first = call("full-0");
    match store
        .begin(
            first.record_id(),
            first.fingerprint(),
            Duration::from_secs(30),
        )
        .await
    {
        Ok(Begin::Replay(outcome)) => assert_eq!(outcome.as_bytes(), big.as_bytes()),
        other => panic!("the first record replays, got {other:?}"),
    }
}
