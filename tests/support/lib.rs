//! Cross-crate tests of idem; the tests live in `tests/*.rs` of this package.
//! This library holds what they share, a concept a file: serving on a real
//! socket (`serving`), clients that hang up (`hang_up`), what they left
//! running (`alive_tasks`), stores that fail
//! (`fake_stores`), direct claims (`claims`), unique names (`unique`), the
//! Redis (`redis`), Sentinel (`sentinel`), Cluster (`cluster`) and
//! replication proxy (`replication_proxy`) topologies on Redis or Valkey
//! (`server`), PostgreSQL
//! (`postgres`) and PgBouncer (`pgbouncer`), MariaDB (`mysql`, and one of a test's own: `private_mariadb`), and free ports and waiting for
//! servers (`ports`), consumer processes of the order examples
//! (`worker`), and a client of the payments example (`payments`).

mod alive_tasks;
pub mod brokers;
mod claims;
pub mod cluster;
mod debit_error;
mod duplicates;
mod dynamodb;
mod fake_stores;
pub mod fault_proxy;
#[cfg(doctest)]
pub mod guide;
mod hang_up;
mod hooked_store;
pub mod lambda_runtime_api;
mod mysql;
pub mod orders;
mod payments;
mod pgbouncer;
mod ports;
mod postgres;
mod private_mariadb;
mod redis;
pub mod replication_proxy;
pub mod second_process;
pub mod sentinel;
mod server;
mod serving;
mod sources;
mod sqlite;
pub mod sqs_queue;
mod told;
mod unique;
mod worker;

pub use alive_tasks::{alive_tasks, alive_tasks_after};
pub use claims::{
    call, claim, until_claim_lapsed, until_claimed, until_lease_lapsed, wait_until_expired,
    wait_until_forgotten,
};
pub use debit_error::DebitError;
pub use duplicates::run_duplicates;
pub use dynamodb::{
    dynamo_store, dynamodb_client, dynamodb_url, unique_table_name, EMULATED_MAX_OUTCOME,
};
pub use fake_stores::{DownStore, LateBegins, NoRenewals, RenewalsFail, SlowBegin};
pub use hang_up::{debit_request, send_and_hang_up, HangUp};
pub use hooked_store::{Hooked, Hooks, Transition};
pub use mysql::{mysql_pool, mysql_store, mysql_store_on, mysql_url, unique_table};
pub use payments::{payments_on_memory, Payments};
pub use pgbouncer::{
    pgbouncer_store, pgbouncer_url, pool_through, store_through, PrivatePgBouncer,
};
pub(crate) use postgres::drop_stale_schemas;
pub use postgres::{database_url, pg_pool, pg_store, unique_schema, PgStatementCounter};
pub use private_mariadb::PrivateMariaDb;
pub use redis::{
    redis_cluster_nodes, redis_command_calls, redis_command_stats, redis_connection, redis_url,
    valkey_cluster_nodes, valkey_url, PrivateRedis,
};
pub use server::Server;
pub use serving::{serve, serve_actix};
pub use sources::rust_sources;
pub use sqlite::{sqlite_path, sqlite_store};
pub use told::Told;
pub use unique::unique_prefix;
pub use worker::{example_binary, Worker};
