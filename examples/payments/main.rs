//! The payments service: debits that happen once, however often a client retries.
//!
//! ```sh
//! cargo run --example payments            # SQLite in ./payments.db, on 127.0.0.1:3000
//! PAYMENTS_STORE=memory cargo run --example payments   # in memory, gone when it stops
//! ADDR=127.0.0.1:8080 DEBIT_DELAY_MS=2000 cargo run --example payments
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example payments
//! REDIS_SENTINELS=redis://127.0.0.1:26401,redis://127.0.0.1:26402,redis://127.0.0.1:26403 \
//!   REDIS_SERVICE=idem-shared REDIS_REPLICAS=1 cargo run --example payments
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example payments
//! DATABASE_URL=mysql://root@127.0.0.1:3306/test cargo run --example payments
//! ```
//!
//! Environment:
//! - `ADDR`: where to listen (default `127.0.0.1:3000`);
//! - `METRICS_ADDR`: if set, where `GET /metrics` (Prometheus text) listens;
//!   needs `--features metrics`;
//! - `ADMIN_ADDR`: if set, where the operators' routes listen
//!   (`idem_axum::admin_router`: `GET`/`DELETE /records?scope=<account>&key=<key>`),
//!   unauthenticated, so keep it on an internal address;
//! - `REDIS_URL`: records and balances in Redis;
//! - `REDIS_SENTINELS` (comma-separated) and `REDIS_SERVICE` (default
//!   `mymaster`): the same on the primary the Sentinels name, followed
//!   through failovers by the store and the ledger;
//! - `REDIS_REPLICAS` and `REDIS_REPLICATION_TIMEOUT_MS` (default 100): the
//!   durable mode (`RedisStore::with_replication`): no claim or answer is
//!   acted on before that many replicas have it;
//! - `DATABASE_URL`: records and balances in PostgreSQL (schema `PG_SCHEMA`,
//!   default `payments`), each debit committed with its record; through
//!   PgBouncer in transaction mode, add `DATABASE_POOLER=transaction` and,
//!   for waiters woken by `LISTEN` rather than polling, a direct
//!   `DATABASE_LISTEN_URL`;
//! - `DATABASE_URL` of `mysql://` (or `mariadb://`): records and balances in
//!   MariaDB or MySQL (tables `<MYSQL_TABLE_PREFIX>idem_records` and
//!   `<MYSQL_TABLE_PREFIX>accounts`, prefix default `payments_`), each debit
//!   committed with its record;
//! - `PAYMENTS_STORE=memory`: both in this process, gone when it stops;
//! - none of these: both in the SQLite file `PAYMENTS_DB` (default
//!   `payments.db`, created if missing), each debit committed with its
//!   record: they survive a restart, with no server to start;
//! - `PROVIDER_URL`: the payment provider each debit charges through
//!   (`cargo run --example provider`), with the debit's claim's downstream
//!   key as the charge's idempotency key; none if not set;
//! - `DEBIT_DELAY_MS`: a slow step inside each debit, after the charge
//!   (default 0);
//! - `LEASE_MS`: how long a claim lives without renewal (default 10000): how
//!   long a key stays blocked after its holder crashed;
//! - `HEADER_TIMEOUT_MS`: how long a client has to send its request headers
//!   before the connection is closed (default 10000);
//! - `MAX_IN_FLIGHT`: at most this many debits run at once; one more is
//!   answered 503 with `Retry-After`, before the store is asked (default:
//!   no bound);
//! - `DRAIN_MS`: on SIGTERM or Ctrl-C the server stops accepting, and the
//!   debits running (those whose client hung up included) get this long to
//!   finish and record before it exits (default 30000). A second signal
//!   exits at once.

use std::process::ExitCode;
use std::time::Duration;

use idem_core::{Policy, DEFAULT_LEASE};
use idem_examples::payments::{router, App};
use idem_examples::provider::ProviderClient;
use idem_examples::serve::{serve, HEADER_READ_TIMEOUT};
use idem_examples::setup::{from_env, millis};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,idem=debug".into()),
        )
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("payments: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let debit_delay = millis("DEBIT_DELAY_MS", Duration::ZERO)?;
    let lease = millis("LEASE_MS", DEFAULT_LEASE)?;
    let header_timeout = millis("HEADER_TIMEOUT_MS", HEADER_READ_TIMEOUT)?;
    let drain = millis("DRAIN_MS", Duration::from_secs(30))?;
    let max_in_flight = match std::env::var("MAX_IN_FLIGHT") {
        Ok(n) => Some(
            n.parse::<usize>()
                .map_err(|e| format!("MAX_IN_FLIGHT={n}: not a count ({e})"))?,
        ),
        Err(_) => None,
    };
    let (store_name, engine, ledger) = from_env().await?;
    let mut engine = engine.with_policy(Policy::default().lease(lease));
    if let Some(n) = max_in_flight {
        engine = engine.with_max_in_flight(n);
    }
    let app = App {
        engine: engine.clone(),
        ledger,
        debit_delay,
        provider: std::env::var("PROVIDER_URL")
            .ok()
            .map(|url| ProviderClient::new(&url)),
    };
    let shutdown = idem_core::shutdown_on_signals();
    if let Ok(metrics_addr) = std::env::var("METRICS_ADDR") {
        serve_metrics(&metrics_addr, header_timeout, shutdown.clone()).await?;
    }
    if let Ok(admin_addr) = std::env::var("ADMIN_ADDR") {
        let admin = tokio::net::TcpListener::bind(&admin_addr)
            .await
            .map_err(|e| format!("cannot listen on ADMIN_ADDR {admin_addr}: {e}"))?;
        println!("payments: operators' routes on http://{admin_addr}/records");
        tokio::spawn(serve(
            admin,
            idem_axum::admin_router(app.engine.clone()),
            header_timeout,
            shutdown.clone(),
            drain,
        ));
    }
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    println!("payments: listening on http://{addr} (store: {store_name}, debit delay: {debit_delay:?}, lease: {lease:?}, header timeout: {header_timeout:?}, max in flight: {max_in_flight:?})");
    let asked = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            println!("payments: stopping");
            tokio::time::Instant::now()
        })
    };
    serve(
        listener,
        router(app),
        header_timeout,
        shutdown.clone(),
        drain,
    )
    .await;
    // Debits whose client hung up run on; they record before the exit,
    // within what is left of the drain.
    let asked = asked.await.unwrap_or_else(|_| tokio::time::Instant::now());
    let left = drain.saturating_sub(asked.elapsed());
    if !engine.drained(left).await {
        eprintln!(
            "payments: {} debits still running past the drain; their keys answer 409 until their \
             lease ends, then their retries run",
            engine.in_flight()
        );
    }
    println!("payments: stopped");
    Ok(())
}

#[cfg(feature = "metrics")]
async fn serve_metrics(
    addr: &str,
    header_timeout: Duration,
    shutdown: idem_core::CancellationToken,
) -> Result<(), String> {
    let router = idem_examples::metrics::router()
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on METRICS_ADDR {addr}: {e}"))?;
    println!("payments: metrics on http://{addr}/metrics");
    tokio::spawn(serve(
        listener,
        router,
        header_timeout,
        shutdown,
        Duration::from_secs(1),
    ));
    Ok(())
}

#[cfg(not(feature = "metrics"))]
#[allow(clippy::unused_async)] // the signature of the metrics build's
async fn serve_metrics(
    _: &str,
    _: Duration,
    _: idem_core::CancellationToken,
) -> Result<(), String> {
    Err(
        "METRICS_ADDR needs the metrics feature: cargo run --example payments --features metrics"
            .into(),
    )
}
