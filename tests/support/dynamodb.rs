//! DynamoDB for tests: moto's server, an emulator that speaks DynamoDB's
//! wire protocol (`scripts/services.sh` starts it on 127.0.0.1:4566), and
//! a table of its own for each test.

use idem_dynamodb::aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use idem_dynamodb::aws_sdk_dynamodb::{Client, Config};

use crate::unique::unique_suffix;

/// The emulator's address: `IDEM_TEST_DYNAMODB` or moto's server on
/// 127.0.0.1:4566.
pub fn dynamodb_url() -> String {
    std::env::var("IDEM_TEST_DYNAMODB").unwrap_or_else(|_| "http://127.0.0.1:4566".to_owned())
}

/// A client of the emulator, with the fixed credentials it accepts.
pub fn dynamodb_client() -> Client {
    let config = Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(dynamodb_url())
        .credentials_provider(Credentials::new("test", "test", None, None, "idem-tests"))
        .build();
    Client::from_conf(config)
}

/// A table name no other test, process or run uses.
pub fn unique_table_name(label: &str) -> String {
    format!("idem_{label}_{}", unique_suffix())
}

/// The largest outcome the tests' stores keep: moto's server refuses an
/// `UpdateItem` of about 250 KB, where DynamoDB takes an item of 400 KB.
pub const EMULATED_MAX_OUTCOME: usize = 240 * 1024;

/// A `DynamoStore` on a new table of its own, keeping outcomes up to
/// [`EMULATED_MAX_OUTCOME`].
pub async fn dynamo_store() -> idem_dynamodb::DynamoStore {
    let client = dynamodb_client();
    let table = unique_table_name("records");
    idem_dynamodb::create_table(&client, &table)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "a DynamoDB table at {} (moto's server: scripts/services.sh): {e}",
                dynamodb_url()
            )
        });
    idem_dynamodb::DynamoStore::new(client, &table).with_max_outcome(EMULATED_MAX_OUTCOME)
}
