//! The store conformance kit against the real MariaDB, each test in a table
//! of its own.

idem_core::store_conformance_tests!(idem_tests::mysql_store);
