//! `idem-postgres` will provide a `Store` for idem on PostgreSQL: one SQL statement
//! per transition, expiry by the server's `now()`, a shipped schema migration, a
//! bounded purge of expired rows, and completion of a record inside the caller's
//! own transaction so that the business writes and the record commit together.
//!
//! **Status: not implemented yet.** This crate exports nothing today; its work is
//! tracked in the project's issue list. Until it lands, use `idem_core::MemoryStore`
//! with `idem_core::Engine`.
