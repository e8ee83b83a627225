//! The store conformance kit against the real PostgreSQL, each test in a
//! schema of its own.

idem_core::store_conformance_tests!(idem_tests::pg_store);
