//! The gRPC payments service (`payments.v1.Ledger`): debits that happen
//! once per `idempotency-key` metadata value, however often a client or a
//! mesh retries. The same ledger as the HTTP example.
//!
//! ```sh
//! cargo run --example grpc_payments            # SQLite in ./payments.db, on 127.0.0.1:50051
//! PAYMENTS_STORE=memory cargo run --example grpc_payments
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example grpc_payments
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example grpc_payments
//! DATABASE_URL=mysql://root@127.0.0.1:3306/test cargo run --example grpc_payments
//! ```
//!
//! Environment: `ADDR` (default `127.0.0.1:50051`), `PAYMENTS_STORE`,
//! `PAYMENTS_DB`, `REDIS_URL`,
//! `DATABASE_URL` and `PG_SCHEMA` or `MYSQL_TABLE_PREFIX`, `DEBIT_DELAY_MS`, `LEASE_MS`, as for the
//! HTTP example (`cargo run --example payments`).

use std::process::ExitCode;
use std::time::Duration;

use idem_core::{Policy, DEFAULT_LEASE};
use idem_examples::grpc_payments::{serve, Payments};
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
            eprintln!("grpc_payments: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:50051".into());
    let debit_delay = millis("DEBIT_DELAY_MS", Duration::ZERO)?;
    let lease = millis("LEASE_MS", DEFAULT_LEASE)?;
    let (store_name, engine, ledger) = from_env().await?;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    println!("grpc_payments: listening on {addr} (store: {store_name}, debit delay: {debit_delay:?}, lease: {lease:?})");
    serve(
        listener,
        engine.with_policy(Policy::default().lease(lease)),
        Payments {
            ledger,
            debit_delay,
        },
    )
    .await
    .map_err(|e| format!("server: {e}"))
}
