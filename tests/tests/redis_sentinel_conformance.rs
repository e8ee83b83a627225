//! The store conformance kit through Redis Sentinel, with the durability
//! setting (`with_replication(1, 500ms)`): every transition behaves as on
//! one server, each change acknowledged by a replica before it is acted on.

idem_core::store_conformance_tests!(idem_tests::sentinel::sentinel_store);
