//! What the payments examples (HTTP and gRPC) share to start: reading their
//! environment, and opening the store and ledger it names.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore};
use idem_mysql::MySqlStore;
use idem_postgres::PgStore;
use idem_redis::RedisStore;

use crate::mysql_ledger::MySqlLedger;
use crate::payments::{Ledger, MemoryLedger, PgLedger, RedisLedger};
use crate::sqlite_ledger::SqliteLedger;

/// A duration in milliseconds from the environment variable `var`, or
/// `default` if it is not set.
pub fn millis(var: &str, default: Duration) -> Result<Duration, String> {
    match std::env::var(var) {
        Err(_) => Ok(default),
        Ok(v) => v
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| format!("{var} must be a whole number of milliseconds: {e}")),
    }
}

/// Records and balances in Redis at `url`.
pub async fn redis(url: &str) -> Result<(Engine, Arc<dyn Ledger>), String> {
    // Records and balances both live in Redis, so instances behind a balancer
    // share them.
    let store = RedisStore::connect(url)
        .await
        .map_err(|e| format!("REDIS_URL: {e}"))?;
    let store = redis_settings(store.with_prefix("payments:idem:"))?;
    // Through the store's own connection, which reconnects after a Redis
    // restart before it answers: a connection of the ledger's own failed
    // its first read after one (503, "ledger unavailable").
    let ledger = RedisLedger::on_store(&store, "payments:balance:");
    Ok((Engine::new(store), Arc::new(ledger)))
}

/// Records and balances on the primary that the Sentinels at `sentinels`
/// (comma-separated `redis://host:port`) name for `service`, followed
/// through failovers by the store and the ledger alike.
pub async fn redis_sentinel(
    sentinels: &str,
    service: &str,
) -> Result<(Engine, Arc<dyn Ledger>), String> {
    let store = RedisStore::connect_sentinel(sentinels.split(',').map(str::trim), service)
        .await
        .map_err(|e| format!("REDIS_SENTINELS: {e}"))?;
    let store = redis_settings(store.with_prefix("payments:idem:"))?;
    let ledger = RedisLedger::on_store(&store, "payments:balance:");
    Ok((Engine::new(store), Arc::new(ledger)))
}

/// The store's settings from the environment: `REDIS_REPLICAS` (the
/// durable mode: acknowledgements each change needs, default none) and
/// `REDIS_REPLICATION_TIMEOUT_MS` (default 100), `REDIS_REPLAY_CACHE_MB`.
fn redis_settings(store: RedisStore) -> Result<RedisStore, String> {
    let store = match std::env::var("REDIS_REPLICAS") {
        Err(_) => store,
        Ok(n) => {
            let replicas: u32 = n
                .parse()
                .map_err(|e| format!("REDIS_REPLICAS must be a whole number: {e}"))?;
            let timeout = millis("REDIS_REPLICATION_TIMEOUT_MS", Duration::from_millis(100))?;
            store.with_replication(replicas, timeout)
        }
    };
    // REDIS_REPLAY_CACHE_MB: answer retries of completed payments from this
    // process (see `RedisStore::with_replay_cache`), each kept at most
    // REDIS_REPLAY_CACHE_MAX_AGE_MS (default 5000).
    let store = match std::env::var("REDIS_REPLAY_CACHE_MB") {
        Err(_) => store,
        Ok(mb) => {
            let mb: u64 = mb.parse().map_err(|e| {
                format!("REDIS_REPLAY_CACHE_MB must be a whole number of megabytes: {e}")
            })?;
            let max_age = millis("REDIS_REPLAY_CACHE_MAX_AGE_MS", Duration::from_secs(5))?;
            store.with_replay_cache(mb << 20, max_age)
        }
    };
    Ok(store)
}

/// Records and balances in PostgreSQL at `url` (schema `PG_SCHEMA`,
/// default `payments`), migrated. With `DATABASE_POOLER=transaction`, `url`
/// goes through a transaction pooler (PgBouncer): statements are unnamed,
/// and the woken wait listens on `DATABASE_LISTEN_URL` (a direct URL) or
/// waiters poll.
pub async fn postgres(url: &str) -> Result<(Engine, Arc<dyn Ledger>), String> {
    let schema = std::env::var("PG_SCHEMA").unwrap_or_else(|_| "payments".into());
    let pooler = match std::env::var("DATABASE_POOLER").as_deref() {
        Err(_) | Ok("" | "none") => false,
        Ok("transaction") => true,
        Ok(other) => {
            return Err(format!(
                "DATABASE_POOLER is `{other}`: set `transaction` for a pooler in transaction mode, or leave it unset"
            ))
        }
    };
    let mut options = url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .map_err(|e| format!("DATABASE_URL: {e}"))?;
    if pooler {
        // A stock PgBouncer refuses the `extra_float_digits` startup
        // parameter sqlx sends by default; nothing here reads floats.
        options = options.extra_float_digits(None);
    }
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect_with(options)
        .await
        .map_err(|e| format!("DATABASE_URL: cannot connect: {e}"))?;
    let mut store = PgStore::new(pool)
        .with_schema(&schema)
        .map_err(|e| format!("PG_SCHEMA: {e}"))?;
    if pooler {
        store = store.behind_transaction_pooler();
    }
    if let Ok(listen) = std::env::var("DATABASE_LISTEN_URL") {
        let options = listen
            .parse::<sqlx::postgres::PgConnectOptions>()
            .map_err(|e| format!("DATABASE_LISTEN_URL: {e}"))?;
        store = store.listen_with(options);
    }
    store
        .migrate()
        .await
        .map_err(|e| format!("migration failed: {e}"))?;
    let ledger = PgLedger::new(store.clone());
    ledger
        .migrate()
        .await
        .map_err(|e| format!("ledger migration failed: {e}"))?;
    store.spawn_purger(Duration::from_mins(1), 1000);
    Ok((Engine::new(store), Arc::new(ledger)))
}

/// Records and balances in MariaDB or MySQL at `url` (tables
/// `<MYSQL_TABLE_PREFIX>idem_records` and `<MYSQL_TABLE_PREFIX>accounts`,
/// prefix default `payments_`), migrated.
pub async fn mysql(url: &str) -> Result<(Engine, Arc<dyn Ledger>), String> {
    let prefix = std::env::var("MYSQL_TABLE_PREFIX").unwrap_or_else(|_| "payments_".into());
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect(url)
        .await
        .map_err(|e| format!("DATABASE_URL: cannot connect: {e}"))?;
    let store = MySqlStore::new(pool)
        .with_table(&format!("{prefix}idem_records"))
        .map_err(|e| format!("MYSQL_TABLE_PREFIX: {e}"))?;
    let accounts = format!("{prefix}accounts");
    store
        .clone()
        .with_table(&accounts)
        .map_err(|e| format!("MYSQL_TABLE_PREFIX: {e}"))?;
    store
        .migrate()
        .await
        .map_err(|e| format!("migration failed: {e}"))?;
    let ledger = MySqlLedger::new(store.clone(), &accounts);
    ledger
        .migrate()
        .await
        .map_err(|e| format!("ledger migration failed: {e}"))?;
    store.spawn_purger(Duration::from_mins(1), 1000);
    Ok((Engine::new(store), Arc::new(ledger)))
}

/// Where records and balances live when no server is named: the SQLite
/// file `PAYMENTS_DB`, by default this.
pub const DEFAULT_DB: &str = "payments.db";

/// Records and balances in the SQLite file `path` (created if missing),
/// migrated: they survive a restart, with nothing to install.
pub async fn sqlite(path: &str) -> Result<(Engine, Arc<dyn Ledger>), String> {
    let store = idem_sqlite::SqliteStore::open(path)
        .await
        .map_err(|e| format!("PAYMENTS_DB: {e}"))?;
    let ledger = SqliteLedger::new(store.clone());
    ledger
        .migrate()
        .await
        .map_err(|e| format!("PAYMENTS_DB: the ledger's migration failed: {e}"))?;
    store.spawn_purger(Duration::from_mins(1), 1000);
    Ok((Engine::new(store), Arc::new(ledger)))
}

/// Records and balances in this process only, gone when it stops.
fn memory() -> (Engine, Arc<dyn Ledger>) {
    let store = MemoryStore::new();
    (
        Engine::new(store.clone()),
        Arc::new(MemoryLedger::new(&store)),
    )
}

/// The store and ledger the environment names: `REDIS_URL`,
/// `REDIS_SENTINELS` (with `REDIS_SERVICE`, default `mymaster`),
/// `DATABASE_URL`, `PAYMENTS_STORE=memory` (both in this process), or none
/// (both in the SQLite file `PAYMENTS_DB`, default [`DEFAULT_DB`]); returns
/// what the store is with them.
pub async fn from_env() -> Result<(String, Engine, Arc<dyn Ledger>), String> {
    match std::env::var("PAYMENTS_STORE").as_deref() {
        Err(_) | Ok("") => {}
        Ok("memory") => {
            let (engine, ledger) = memory();
            return Ok(("memory".into(), engine, ledger));
        }
        Ok(other) => {
            return Err(format!(
                "PAYMENTS_STORE is `{other}`: set `memory`, or leave it unset (SQLite, or the server REDIS_URL or DATABASE_URL names)"
            ))
        }
    }
    if let Ok(sentinels) = std::env::var("REDIS_SENTINELS") {
        if std::env::var("REDIS_URL").is_ok() || std::env::var("DATABASE_URL").is_ok() {
            return Err("set one of REDIS_SENTINELS, REDIS_URL and DATABASE_URL".into());
        }
        let service = std::env::var("REDIS_SERVICE").unwrap_or_else(|_| "mymaster".into());
        let (engine, ledger) = redis_sentinel(&sentinels, &service).await?;
        return Ok(("redis (Sentinel)".into(), engine, ledger));
    }
    let (name, (engine, ledger)) = match (std::env::var("REDIS_URL"), std::env::var("DATABASE_URL"))
    {
        (Ok(_), Ok(_)) => return Err("set REDIS_URL or DATABASE_URL, not both".into()),
        (Ok(url), Err(_)) => ("redis", redis(&url).await?),
        (Err(_), Ok(url)) if url.starts_with("mysql:") || url.starts_with("mariadb:") => (
            "mysql",
            mysql(&url.replacen("mariadb:", "mysql:", 1)).await?,
        ),
        (Err(_), Ok(url)) => ("postgres", postgres(&url).await?),
        (Err(_), Err(_)) => {
            let path = std::env::var("PAYMENTS_DB").unwrap_or_else(|_| DEFAULT_DB.into());
            let opened = sqlite(&path).await?;
            return Ok((format!("sqlite, in {path}"), opened.0, opened.1));
        }
    };
    Ok((name.into(), engine, ledger))
}
