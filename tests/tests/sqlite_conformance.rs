//! The store conformance kit against SQLite, each test in a database file
//! of its own.

idem_core::store_conformance_tests!(idem_tests::sqlite_store);
