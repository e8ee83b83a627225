//! The payments service: debits that happen once, however often a client retries.
//!
//! ```sh
//! cargo run --example payments            # in-memory store on 127.0.0.1:3000
//! ADDR=127.0.0.1:8080 DEBIT_DELAY_MS=2000 cargo run --example payments
//! ```
//!
//! The store is chosen by environment: `REDIS_URL` for Redis, `DATABASE_URL`
//! for PostgreSQL, neither for memory.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore};
use idem_examples::payments::{router, App, Ledger, MemoryLedger, RedisLedger};
use idem_redis::RedisStore;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,idem=debug".into()),
        )
        .init();

    for (var, store) in [
        ("REDIS_URL", "Redis (idem-redis)"),
        ("DATABASE_URL", "PostgreSQL (idem-postgres)"),
    ] {
        if std::env::var_os(var).is_some() {
            eprintln!("payments: {var} is set, but the {store} store is not implemented yet; unset {var} to run on the in-memory store");
            return ExitCode::from(2);
        }
    }
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let debit_delay = match std::env::var("DEBIT_DELAY_MS").map(|v| v.parse::<u64>()) {
        Err(_) => Duration::ZERO,
        Ok(Ok(ms)) => Duration::from_millis(ms),
        Ok(Err(e)) => {
            eprintln!("payments: DEBIT_DELAY_MS must be a whole number of milliseconds: {e}");
            return ExitCode::from(2);
        }
    };
    let (engine, ledger, store_name): (Engine, Arc<dyn Ledger>, &str) =
        match std::env::var("REDIS_URL") {
            Ok(url) => {
                // Records and balances both live in Redis, so instances behind a
                // balancer share them.
                let store = match RedisStore::connect(&url).await {
                    Ok(store) => store.with_prefix("payments:idem:"),
                    Err(e) => {
                        eprintln!("payments: REDIS_URL: {e}");
                        return ExitCode::FAILURE;
                    }
                };
                let ledger = match RedisLedger::connect(&url, "payments:balance:").await {
                    Ok(ledger) => ledger,
                    Err(e) => {
                        eprintln!(
                            "payments: REDIS_URL: cannot open the ledger: {:?}",
                            e.kind()
                        );
                        return ExitCode::FAILURE;
                    }
                };
                (Engine::new(store), Arc::new(ledger), "redis")
            }
            Err(_) => (
                Engine::new(MemoryStore::new()),
                Arc::new(MemoryLedger::default()),
                "memory",
            ),
        };
    let app = App {
        engine,
        ledger,
        debit_delay,
    };
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("payments: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "payments: listening on http://{addr} (store: {store_name}, debit delay: {debit_delay:?})"
    );
    if let Err(e) = axum::serve(listener, router(app)).await {
        eprintln!("payments: server failed: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
