//! `idem-redis` will provide a `Store` for idem on Redis and Redis Cluster: one
//! hash-tagged key per record, one Lua script call per transition, expiry decided by
//! the Redis server's clock, and reconnection through `ConnectionManager`.
//!
//! **Status: not implemented yet.** This crate exports nothing today; its work is
//! tracked in the project's issue list. Until it lands, use `idem_core::MemoryStore`
//! with `idem_core::Engine`.
