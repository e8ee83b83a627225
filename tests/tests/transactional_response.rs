//! `idem_axum::commit_response` on PostgreSQL, over a real socket: a
//! handler's writes and its recorded response commit together or not at all,
//! under the route's record policy, a lost claim and a failed commit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use idem_axum::{commit_response, idempotent};
use idem_core::Engine;
use idem_postgres::PgStore;
use idem_tests::{pg_store, serve, PgStatementCounter};
use sqlx::AssertSqlSafe;
use tokio::sync::Notify;

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    store: PgStore,
    runs: Arc<AtomicUsize>,
    /// Set: the handler waits for it before recording (the test takes the
    /// claim over meanwhile).
    hold: Option<Arc<(Notify, Notify)>>,
}

/// Writes a row named by the request, then answers `status` (taken from the
/// path), recording it in the same transaction. Status 299 writes the row
/// twice, which a deferred unique constraint refuses at commit.
#[idempotent(claim = claim, lease = "2s")]
async fn write(State(app): State<App>, Path((name, status)): Path<(String, u16)>) -> Response {
    let run = app.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let Ok(mut tx) = app.store.begin_transaction().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let table = format!("\"{}\".writes", app.store.schema());
    let times = if status == 299 && run == 1 { 2 } else { 1 };
    for _ in 0..times {
        let insert = sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {table} (name) VALUES ($1)"
        )))
        .bind(&name)
        .execute(&mut *tx)
        .await;
        if insert.is_err() {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    }
    if let Some(hold) = &app.hold {
        hold.0.notify_one();
        hold.1.notified().await;
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let response = (status, format!("wrote {name} in run {run}"));
    commit_response(tx, &claim, response).await
}

async fn start(store: PgStore, hold: Option<Arc<(Notify, Notify)>>) -> (String, App) {
    let table = format!("\"{}\".writes", store.schema());
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (name text, \
         CONSTRAINT writes_once UNIQUE (name) DEFERRABLE INITIALLY DEFERRED)"
    )))
    .execute(store.pool())
    .await
    .expect("writes table");
    let app = App {
        engine: Engine::new(store.clone()),
        store,
        runs: Arc::new(AtomicUsize::new(0)),
        hold,
    };
    let router = Router::new()
        .route("/writes/{name}/{status}", post(write))
        .with_state(app.clone());
    (serve(router).await, app)
}

async fn post_as(url: &str, key: &str) -> (StatusCode, String) {
    let r = reqwest::Client::new()
        .post(url)
        .header("idempotency-key", key)
        .send()
        .await
        .expect("request");
    let status = r.status();
    (status, r.text().await.expect("body"))
}

async fn rows(store: &PgStore, name: &str) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".writes WHERE name = $1",
        store.schema()
    )))
    .bind(name)
    .fetch_one(store.pool())
    .await
    .expect("count")
}

async fn completed_records(store: &PgStore) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".records WHERE completed",
        store.schema()
    )))
    .fetch_one(store.pool())
    .await
    .expect("records")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_and_its_answer_commit_together_in_five_statements_and_retries_replay_it() {
    let direct = pg_store().await;
    // Count the statements of the request path through a proxy.
    let proxy = PgStatementCounter::start("127.0.0.1:5432").await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect(&format!(
            "postgres://postgres@{}/test?sslmode=disable",
            proxy.addr
        ))
        .await
        .expect("pool through the proxy");
    let store = PgStore::new(pool)
        .with_schema(direct.schema())
        .expect("name");
    let (url, app) = start(store.clone(), None).await;

    let before = proxy.executed();
    let first = post_as(&format!("{url}/writes/ann/201"), "k-ann").await;
    assert_eq!(first, (StatusCode::CREATED, "wrote ann in run 1".into()));
    assert_eq!(
        proxy.executed() - before,
        5,
        "begin, BEGIN, the write, complete, COMMIT: nothing recorded twice"
    );
    let before = proxy.executed();
    let again = post_as(&format!("{url}/writes/ann/201"), "k-ann").await;
    assert_eq!(again, first, "the replay is the committed answer");
    assert_eq!(proxy.executed() - before, 1, "a replay: begin");
    assert_eq!(rows(&store, "ann").await, 1);
    assert_eq!(app.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_answer_rolls_its_write_back_and_the_retry_runs_again() {
    let store = pg_store().await;
    let (url, app) = start(store.clone(), None).await;
    let first = post_as(&format!("{url}/writes/bob/503"), "k-bob").await;
    assert_eq!(first.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(rows(&store, "bob").await, 0, "not recorded: rolled back");
    assert_eq!(completed_records(&store).await, 0);
    let retry = post_as(&format!("{url}/writes/bob/503"), "k-bob").await;
    assert_eq!(
        retry,
        (StatusCode::SERVICE_UNAVAILABLE, "wrote bob in run 2".into()),
        "the claim was released: the retry runs again at once"
    );
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_claim_was_taken_over_leaves_neither_its_write_nor_a_record() {
    let store = pg_store().await;
    let hold = Arc::new((Notify::new(), Notify::new()));
    let (url, app) = start(store.clone(), Some(Arc::clone(&hold))).await;
    let request = tokio::spawn({
        let url = url.clone();
        async move { post_as(&format!("{url}/writes/cat/201"), "k-cat").await }
    });
    // The handler has written its row; another holder takes the claim over.
    hold.0.notified().await;
    sqlx::query(AssertSqlSafe(format!(
        "UPDATE \"{}\".records SET token = token + 1000",
        store.schema()
    )))
    .execute(store.pool())
    .await
    .expect("takeover");
    hold.1.notify_one();
    let (status, body) = request.await.expect("request");
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("urn:idem:problem:lease-lost"), "{body}");
    assert!(body.contains("rolled back"), "{body}");
    assert_eq!(rows(&store, "cat").await, 0, "the write was rolled back");
    assert_eq!(completed_records(&store).await, 0, "and nothing recorded");
    assert_eq!(app.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_answers_503_records_nothing_and_the_key_runs_again_after_the_lease() {
    let store = pg_store().await;
    let (url, app) = start(store.clone(), None).await;
    // Status 299: the first run writes its row twice; the deferred unique
    // constraint fails the COMMIT.
    let first = post_as(&format!("{url}/writes/dan/299"), "k-dan").await;
    assert_eq!(first.0, StatusCode::SERVICE_UNAVAILABLE, "{}", first.1);
    assert!(
        first.1.contains("urn:idem:problem:commit-uncertain"),
        "{}",
        first.1
    );
    assert_eq!(rows(&store, "dan").await, 0);
    assert_eq!(completed_records(&store).await, 0, "nothing recorded");
    // Whether it committed is unknown to the server's caller: the key is in
    // flight until the lease (2 s) ends, not released at once.
    let during = post_as(&format!("{url}/writes/dan/299"), "k-dan").await;
    assert_eq!(during.0, StatusCode::CONFLICT, "{}", during.1);
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    let after = post_as(&format!("{url}/writes/dan/299"), "k-dan").await;
    assert_eq!(
        after,
        (
            StatusCode::from_u16(299).expect("status"),
            "wrote dan in run 2".into()
        )
    );
    assert_eq!(rows(&store, "dan").await, 1);
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);
}
