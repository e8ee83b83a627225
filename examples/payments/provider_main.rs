//! The payment provider the payments example charges through, itself
//! idempotent: a charge sent again with the same key is charged once.
//!
//! ```sh
//! cargo run --example provider                        # on 127.0.0.1:3100
//! PROVIDER_URL=http://127.0.0.1:3100 cargo run --example payments
//! curl -s 127.0.0.1:3100/charges/count               # {"charges":N}
//! ```
//!
//! Environment: `ADDR`, where to listen (default `127.0.0.1:3100`). Its
//! records are in memory.

use std::process::ExitCode;

use idem_core::{Engine, MemoryStore};
use idem_examples::provider::{provider_router, Charges, Provider};
use idem_examples::serve::{serve, HEADER_READ_TIMEOUT};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3100".into());
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("provider: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("provider: listening on http://{addr}");
    let provider = Provider {
        engine: Engine::new(MemoryStore::new()),
        charges: Charges::default(),
    };
    serve(
        listener,
        provider_router(provider),
        HEADER_READ_TIMEOUT,
        idem_core::shutdown_on_signals(),
        std::time::Duration::from_secs(30),
    )
    .await;
    ExitCode::SUCCESS
}
