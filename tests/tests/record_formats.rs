//! Upgrades that share a store: a record written by the previous version
//! (its bytes pinned here, as that version wrote them) still replays; a
//! record in a format newer than this version's is refused, transiently
//! (mid-rollout, an upgraded instance reads it), and never misread nor taken
//! over. On Redis and Valkey, PostgreSQL and MariaDB (tables made by the
//! previous version's migration, then migrated), and for the engine's own
//! record.

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{
    Call, Engine, Error, Fingerprint, IdempotencyKey, MemoryStore, Never, Outcome, Removal, Store,
    StoreError, StoreErrorKind,
};
use idem_tests::{mysql_pool, pg_pool, redis_connection, redis_url, unique_prefix, unique_schema};
use idem_tests::{unique_table, valkey_url};

/// A recorded 201 with `content-type: application/json` and `{"ok":true}`,
/// byte for byte as `idem_http::encode` wrote it before this version.
const RESPONSE_V1: &[u8] = b"IDR1\x00\xc9\x00\x00\x00\x01\
\x00\x0ccontent-type\x00\x00\x00\x10application/json\
\x00\x00\x00\x00\x00\x00\x00\x0b{\"ok\":true}";

fn call(key: &str) -> Call {
    Call::new(
        "formats",
        IdempotencyKey::parse(key).expect("key"),
        Fingerprint::of("debit", &key).expect("fingerprint"),
    )
}

fn is_newer(answer: &Result<impl std::fmt::Debug, StoreError>) -> bool {
    matches!(answer, Err(e) if e.kind() == StoreErrorKind::NewerFormat && e.is_transient()
        && e.to_string().contains("newer version of idem"))
}

/// A retry of `c` on `store` replays the pinned response byte for byte.
async fn replays_the_pinned_response(store: &impl Store, c: &Call, what: &str) {
    match store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
        .await
    {
        Ok(Begin::Replay(o)) => {
            assert_eq!(o.as_bytes(), RESPONSE_V1, "{what}: byte for byte");
            let back = idem_http::decode(&o).expect("format 1 reads");
            assert_eq!((back.status, &back.body[..]), (201, &b"{\"ok\":true}"[..]));
        }
        other => panic!("{what}: a record of the previous version: {other:?}"),
    }
}

/// Every call that reads `c`'s record on `store` refuses it as newer.
async fn refuses_the_newer_record(store: &impl Store, c: &Call, what: &str) {
    let begin = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
        .await;
    assert!(is_newer(&begin), "{what}: begin: {begin:?}");
    let inspect = store.inspect(c.record_id()).await;
    assert!(is_newer(&inspect), "{what}: inspect: {inspect:?}");
    let remove: Result<Removal, _> = store.remove(c.record_id(), true).await;
    assert!(is_newer(&remove), "{what}: remove: {remove:?}");
}

/// The key the previous version wrote `c`'s record under by default:
/// `<prefix>{<hex id>}`.
fn hex_key(prefix: &str, c: &Call) -> String {
    format!("{prefix}{{{}}}", c.record_id().to_hex())
}

/// `SET key value PX ms`.
async fn set(con: &mut redis::aio::MultiplexedConnection, key: &str, value: &[u8], ms: u64) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(ms)
        .query_async(con)
        .await
        .expect("SET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_record_of_the_previous_version_replays_and_a_newer_one_is_refused() {
    for (url, what) in [(redis_url(), "redis"), (valkey_url(), "valkey")] {
        let prefix = unique_prefix("formats");
        let store = idem_redis::RedisStore::connect(&url)
            .await
            .expect(what)
            .with_prefix(&prefix);
        let mut con = redis_connection(&url).await;
        let c = call("old-1");
        // The previous version's value: state, fingerprint, token, outcome.
        let mut value = b"C".to_vec();
        value.extend_from_slice(c.fingerprint().as_bytes());
        value.extend_from_slice(b"1764000000000001");
        value.extend_from_slice(RESPONSE_V1);
        // Under the key the previous version wrote by default; this
        // version writes compact keys, and finds it there.
        let key = hex_key(&prefix, &c);
        assert_ne!(store.key(c.record_id()), key, "{what}: compact by default");
        set(&mut con, &key, &value, 60_000).await;
        replays_the_pinned_response(&store, &c, what).await;
        // An instance that writes hex keys finds it too.
        let hex = store.clone().with_key_layout(idem_redis::KeyLayout::Hex);
        replays_the_pinned_response(&hex, &c, what).await;

        // A format-3 record (its first byte names it).
        value[0] = b'3';
        set(&mut con, &key, &value, 60_000).await;
        refuses_the_newer_record(&store, &c, what).await;
        let kept: Vec<u8> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut con)
            .await
            .expect("GET");
        assert_eq!(kept, value, "{what}: left as it was");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_retry_of_a_debit_the_previous_version_traced_is_still_refused() {
    for (url, what) in [(redis_url(), "redis"), (valkey_url(), "valkey")] {
        let prefix = unique_prefix("formats-trace");
        let store = idem_redis::RedisStore::connect(&url)
            .await
            .expect(what)
            .with_prefix(&prefix);
        let mut con = redis_connection(&url).await;
        // The previous version's trace of an expired record: its
        // fingerprint under `<key>:t`, the record itself gone.
        let c = call("old-traced");
        set(
            &mut con,
            &format!("{}:t", hex_key(&prefix, &c)),
            c.fingerprint().as_bytes(),
            60_000,
        )
        .await;
        let lease = Duration::from_secs(30);
        let begin = store.begin(c.record_id(), c.fingerprint(), lease).await;
        assert!(matches!(begin, Ok(Begin::Expired)), "{what}: {begin:?}");
        let other = Fingerprint::of("debit", &"another body").expect("fingerprint");
        let begin = store.begin(c.record_id(), &other, lease).await;
        assert!(matches!(begin, Ok(Begin::Mismatch)), "{what}: {begin:?}");
        // Removing it lets a retry run again, once.
        let removed = store.remove(c.record_id(), false).await;
        assert!(
            matches!(removed, Ok(Removal::Removed)),
            "{what}: {removed:?}"
        );
        let begin = store.begin(c.record_id(), c.fingerprint(), lease).await;
        assert!(matches!(begin, Ok(Begin::Acquired(_))), "{what}: {begin:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_record_carries_its_trace_in_one_key() {
    let url = redis_url();
    let prefix = unique_prefix("formats-one-key");
    let store = idem_redis::RedisStore::connect(&url)
        .await
        .expect("redis")
        .with_prefix(&prefix);
    let mut con = redis_connection(&url).await;
    let c = call("one-key");
    let lease = Duration::from_secs(30);
    let Ok(Begin::Acquired(lease)) = store.begin(c.record_id(), c.fingerprint(), lease).await
    else {
        panic!("a new key is claimed");
    };
    let ttl = Duration::from_mins(1);
    store
        .complete(
            c.record_id(),
            &lease,
            &Outcome::new(RESPONSE_V1.to_vec()),
            ttl,
        )
        .await
        .expect("complete");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut con)
        .await
        .expect("KEYS");
    assert_eq!(keys, [store.key(c.record_id())], "one key, the compact one");
    let value: Vec<u8> = redis::cmd("GET")
        .arg(&keys[0])
        .query_async(&mut con)
        .await
        .expect("GET");
    assert_eq!(
        value[0], b'2',
        "format 2: a completed record with its trace"
    );
    // It lives its TTL and the trace (a day by default).
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&keys[0])
        .query_async(&mut con)
        .await
        .expect("PTTL");
    let day = i64::try_from(idem_redis::DEFAULT_TRACE.as_millis()).expect("ms");
    assert!(pttl > day && pttl <= day + 60_000, "{pttl}");
    replays_the_pinned_response(&store, &c, "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_table_of_the_previous_version_is_migrated_and_its_records_replay() {
    let pool = pg_pool(4).await;
    let schema = unique_schema();
    let c = call("old-2");
    // The previous version's migration, and a record it wrote.
    for statement in [
        format!("CREATE SCHEMA \"{schema}\""),
        format!(
            "CREATE TABLE \"{schema}\".records (id bytea PRIMARY KEY, fingerprint bytea NOT NULL, \
             token bigint NOT NULL, completed boolean NOT NULL, deadline timestamptz NOT NULL, \
             outcome bytea, waiting boolean NOT NULL DEFAULT false)"
        ),
        format!("CREATE INDEX records_deadline_idx ON \"{schema}\".records (deadline)"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .expect("the previous migration");
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{schema}\".records VALUES \
         ($1, $2, 1764000000000001, true, now() + interval '1 hour', $3, false)"
    )))
    .bind(&c.record_id().as_bytes()[..])
    .bind(&c.fingerprint().as_bytes()[..])
    .bind(RESPONSE_V1)
    .execute(&pool)
    .await
    .expect("a record of the previous version");

    let store = idem_postgres::PgStore::new(pool.clone())
        .with_schema(&schema)
        .expect("schema");
    store.migrate().await.expect("migrated");
    replays_the_pinned_response(&store, &c, "postgres").await;

    // Format 2, even expired, is neither read nor taken over.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE \"{schema}\".records SET format = 2"
    )))
    .execute(&pool)
    .await
    .expect("format 2");
    refuses_the_newer_record(&store, &c, "postgres").await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE \"{schema}\".records SET deadline = now() - interval '1 year'"
    )))
    .execute(&pool)
    .await
    .expect("long dead");
    refuses_the_newer_record(&store, &c, "postgres, expired").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mariadb_table_of_the_previous_version_is_migrated_and_its_records_replay() {
    let pool = mysql_pool(4).await;
    let table = unique_table();
    let c = call("old-3");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE `{table}` (id BINARY(32) NOT NULL, fingerprint BINARY(32) NOT NULL, \
         token BIGINT NOT NULL, completed BOOLEAN NOT NULL, deadline DATETIME(6) NOT NULL, \
         outcome LONGBLOB NULL, PRIMARY KEY (id), KEY `{table}_deadline` (deadline)) \
         ENGINE = InnoDB"
    )))
    .execute(&pool)
    .await
    .expect("the previous migration");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO `{table}` VALUES \
         (?, ?, 1764000000000001, 1, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, ?)"
    )))
    .bind(&c.record_id().as_bytes()[..])
    .bind(&c.fingerprint().as_bytes()[..])
    .bind(RESPONSE_V1)
    .execute(&pool)
    .await
    .expect("a record of the previous version");

    let store = idem_mysql::MySqlStore::new(pool.clone())
        .with_table(&table)
        .expect("table");
    store.migrate().await.expect("migrated");
    store.migrate().await.expect("migrated twice");
    replays_the_pinned_response(&store, &c, "mariadb").await;

    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE `{table}` SET format = 2"
    )))
    .execute(&pool)
    .await
    .expect("format 2");
    refuses_the_newer_record(&store, &c, "mariadb").await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE `{table}` SET deadline = UTC_TIMESTAMP(6) - INTERVAL 1 YEAR"
    )))
    .execute(&pool)
    .await
    .expect("long dead");
    refuses_the_newer_record(&store, &c, "mariadb, expired").await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE `{table}`")))
        .execute(&pool)
        .await;
}

#[tokio::test]
async fn an_engine_record_of_the_previous_version_replays_and_a_newer_one_is_refused() {
    let store = MemoryStore::new();
    let engine = Engine::new(store.clone());
    for (key, recorded) in [
        // The engine's format 1, as the previous version wrote it.
        ("old-4", &b"{\"ok\":\"receipt 7\"}"[..]),
        ("new-4", &b"IDE2\x00whatever a later format holds"[..]),
    ] {
        let c = call(key);
        let Ok(Begin::Acquired(lease)) = store
            .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
            .await
        else {
            panic!("a fresh key")
        };
        store
            .complete(
                c.record_id(),
                &lease,
                &Outcome::new(recorded.to_vec()),
                Duration::from_mins(1),
            )
            .await
            .expect("complete");
    }
    let old = engine
        .run(&call("old-4"), |_| async {
            Ok::<_, Never>("receipt 8".to_owned())
        })
        .await
        .expect("replayed");
    assert_eq!(old.into_inner(), "receipt 7");
    let newer = engine
        .run(&call("new-4"), |_| async {
            Ok::<_, Never>("receipt 9".to_owned())
        })
        .await;
    match newer {
        Err(e @ Error::Codec(_)) => {
            assert!(e.is_transient(), "{e}");
            assert!(e.to_string().contains("newer version of idem"), "{e}");
        }
        other => panic!("a record of a newer format: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_resent_after_its_record_expired_records_nothing() {
    // A record that carries its trace outlives its replay; past it, the
    // holder's token no longer holds anything: a resent completion (or
    // commit) is a lost lease, as on a record whose key expired.
    for (url, what) in [(redis_url(), "redis"), (valkey_url(), "valkey")] {
        let store = idem_redis::RedisStore::connect(&url)
            .await
            .expect(what)
            .with_prefix(&unique_prefix("formats-resent"));
        let c = call("resent");
        let Ok(Begin::Acquired(lease)) = store
            .begin(c.record_id(), c.fingerprint(), Duration::from_mins(1))
            .await
        else {
            panic!("{what}: a new key is claimed");
        };
        let outcome = Outcome::new(RESPONSE_V1.to_vec());
        let ttl = Duration::from_millis(20);
        store
            .complete(c.record_id(), &lease, &outcome, ttl)
            .await
            .expect("complete");
        // Resent while it replays: done before by this token.
        let again = store.complete(c.record_id(), &lease, &outcome, ttl).await;
        assert!(again.is_ok(), "{what}: {again:?}");
        // Wait until only its trace is left.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !matches!(
            store
                .begin(c.record_id(), c.fingerprint(), Duration::from_mins(1))
                .await,
            Ok(Begin::Expired)
        ) {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: never expired"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let late = store.complete(c.record_id(), &lease, &outcome, ttl).await;
        assert!(
            matches!(&late, Err(e) if e.is_lease_lost()),
            "{what}: {late:?}"
        );
    }
}
