//! # idem-dynamodb
//!
//! A [`Store`](idem_core::Store) for idem on Amazon DynamoDB, for services
//! where the platform itself retries (AWS Lambda, SQS, API Gateway
//! clients): one item a record, keyed by the record's id
//! ([ADR 0013](https://github.com/idem-rs/idem/blob/main/docs/adr/0013-dynamodb-claims-by-condition-tokens-from-the-clock.md)).
//!
//! - **A claim is one conditional write.** A duplicate learns what it
//!   found (in flight, a replay, another request under the key, a late
//!   retry) in the same round trip, from the item returned with the failed
//!   condition.
//! - **Fencing tokens** grow with every claim of a key, from the caller's
//!   clock, as on every store: a holder past its lease is refused.
//! - **Effects commit with their record** in one `TransactWriteItems`
//!   ([`DynamoStore::transaction`]), conditioned on the claim being live.
//! - **Expiry** is DynamoDB's TTL on `expires`, which deletes late: every
//!   condition compares the deadline itself.
//! - **Errors**: throttling and a lost connection are transient (503, never
//!   500); a transaction that met another is a conflict; an outcome too
//!   large for an item ([`MAX_OUTCOME_BYTES`]) is refused, as on the other
//!   stores.
//!
//! The application builds the `aws_sdk_dynamodb::Client` (its region,
//! credentials and HTTP client); [`create_table`] makes the table, or
//! [`check_table`] checks one at start.

mod dynamo_error;
mod dynamo_store;
mod dynamo_transaction;
mod item;
mod table;
mod transitions;

pub use aws_sdk_dynamodb;
pub use dynamo_store::{DynamoStore, DEFAULT_TRACE};
pub use dynamo_transaction::{DynamoTransaction, MAX_TRANSACTION_ITEMS};
pub use item::MAX_OUTCOME_BYTES;
pub use table::{check_table, create_table, TableError};
