//! Runnable examples of idem, and the code they share with the tests:
//! `cargo run --example payments` and `cargo run --example queue_consumer`
//! from the repository root.

#[path = "payments/app.rs"]
pub mod payments;

/// What the payments service asks of where balances live.
#[path = "payments/ledger.rs"]
pub mod ledger;

/// The payments example's balances in memory.
#[path = "payments/memory_ledger.rs"]
pub mod memory_ledger;

/// The payments example's balances in Redis.
#[path = "payments/redis_ledger.rs"]
pub mod redis_ledger;

/// The payments example's balances in PostgreSQL.
#[path = "payments/pg_ledger.rs"]
pub mod pg_ledger;

/// The payment provider the payments example charges through
/// (`cargo run --example provider`).
#[path = "payments/provider.rs"]
pub mod provider;

pub mod setup;

/// The payments example's balances in MariaDB or MySQL.
#[path = "payments/mysql_ledger.rs"]
pub mod mysql_ledger;

/// The payments example's balances in SQLite.
#[path = "payments/sqlite_ledger.rs"]
pub mod sqlite_ledger;

/// The order pipeline's handler, shared by the broker examples
/// (`orders_rabbitmq`, `orders_nats`, `orders_redis_streams`).
#[path = "orders/shipping.rs"]
pub mod shipping;

/// Where the order examples count shipments: Redis or PostgreSQL.
#[path = "orders/shipments.rs"]
pub mod shipments;

/// Serving a router with a header read timeout (used by the payments example).
#[path = "payments/serve.rs"]
pub mod serve;

/// The payments example's `/metrics`, in Prometheus's text format.
#[cfg(feature = "metrics")]
#[path = "payments/metrics.rs"]
pub mod metrics;

/// The gRPC payments service (`cargo run --example grpc_payments`).
#[path = "grpc_payments/service.rs"]
pub mod grpc_payments;
