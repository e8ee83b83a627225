//! The store conformance kit against DynamoDB (moto's server, an emulator
//! that speaks its wire protocol), each test on a table of its own. An
//! outcome is kept up to the store's limit (here the emulator's, below
//! DynamoDB's item), and one byte more is refused as full.

idem_core::store_conformance_tests!(
    idem_tests::dynamo_store,
    largest_outcome = idem_tests::EMULATED_MAX_OUTCOME
);
