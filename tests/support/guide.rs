//! The guide's examples, compiled: each page of `docs/guide/` is the doc
//! of an item here, so `cargo test --doc` builds every Rust block in it
//! (and runs those not marked `no_run`).

/// `docs/guide/adapters.md`.
#[doc = include_str!("../../docs/guide/adapters.md")]
pub struct Adapters;

/// `docs/guide/attribute.md`.
#[doc = include_str!("../../docs/guide/attribute.md")]
pub struct Attribute;

/// `docs/guide/client.md`.
#[doc = include_str!("../../docs/guide/client.md")]
pub struct Client;

/// `docs/guide/consumers.md`.
#[doc = include_str!("../../docs/guide/consumers.md")]
pub struct Consumers;

/// `docs/guide/engine.md`.
#[doc = include_str!("../../docs/guide/engine.md")]
pub struct EngineDirectly;

/// `docs/guide/errors.md`.
#[doc = include_str!("../../docs/guide/errors.md")]
pub struct Errors;

/// `docs/guide/mysql.md`.
#[doc = include_str!("../../docs/guide/mysql.md")]
pub struct MySql;

/// `docs/guide/postgres.md`.
#[doc = include_str!("../../docs/guide/postgres.md")]
pub struct Postgres;

/// `docs/guide/sqlite.md`.
#[doc = include_str!("../../docs/guide/sqlite.md")]
pub struct Sqlite;

/// `docs/guide/dynamodb.md`.
#[doc = include_str!("../../docs/guide/dynamodb.md")]
pub struct Dynamodb;

/// `docs/guide/records.md`.
#[doc = include_str!("../../docs/guide/records.md")]
pub struct Records;

/// `docs/guide/redis.md`.
#[doc = include_str!("../../docs/guide/redis.md")]
pub struct Redis;
