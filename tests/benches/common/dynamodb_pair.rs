//! `-- dynamodb`: the payments debit with its keys on DynamoDB (moto's
//! server, the emulator `scripts/services.sh` starts), idem
//! (`DynamoStore`) against the same handler doing the least design: a
//! conditional `PutItem` (`attribute_not_exists(pk)`) to claim the key and
//! a `PutItem` of the response to record it, each in a table of its own
//! made by `idem_dynamodb::create_table`. Balances are in memory on both
//! sides, as in the Redis pair: the pair measures what idem adds on the
//! store. The emulator's own speed says nothing; the ratio does.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use idem_core::{Engine, MemoryStore, Policy};
use idem_dynamodb::DynamoStore;
use idem_examples::payments::{router, MemoryLedger};

use crate::naive::{naive_router, Naive, NaiveKeys};
use crate::unfenced::Unfenced;
use crate::{app_with, compare};

/// The least design's keys: one item each, `pk` the key (bytes, as the
/// table made by `create_table` keys its items), `out` the response once
/// recorded.
#[derive(Clone)]
struct DynamoKeys {
    client: Client,
    table: Arc<str>,
}

impl NaiveKeys for DynamoKeys {
    async fn claim(&self, key: &str) -> Result<bool, String> {
        let put = self
            .client
            .put_item()
            .table_name(&*self.table)
            .item("pk", key_of(key))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(PutItemError::is_conditional_check_failed_exception) =>
            {
                Ok(false)
            }
            Err(e) => Err(format!("PutItem: {}", DisplayErrorContext(e))),
        }
    }

    async fn record(&self, key: &str, response: &[u8]) -> Result<(), String> {
        self.client
            .put_item()
            .table_name(&*self.table)
            .item("pk", key_of(key))
            .item("out", AttributeValue::B(response.to_vec().into()))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| format!("PutItem: {}", DisplayErrorContext(e)))
    }

    async fn recorded(&self, key: &str) -> Result<Option<bytes::Bytes>, String> {
        let got = self
            .client
            .get_item()
            .table_name(&*self.table)
            .key("pk", key_of(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| format!("GetItem: {}", DisplayErrorContext(e)))?;
        Ok(got
            .item()
            .and_then(|item| item.get("out"))
            .and_then(|out| out.as_b().ok())
            .map(|b| bytes::Bytes::copy_from_slice(b.as_ref())))
    }
}

/// The key as the table keeps its items' keys: bytes.
fn key_of(key: &str) -> AttributeValue {
    AttributeValue::B(key.as_bytes().to_vec().into())
}

/// The run's tables, idem's and the least design's.
fn tables() -> [String; 2] {
    ["idem", "least"].map(|who| idem_tests::unique_table_name(&format!("bench_{who}")))
}

async fn pair(client: &Client, tables: &[String; 2]) -> Result<(String, String), String> {
    for table in tables {
        idem_dynamodb::create_table(client, table)
            .await
            .map_err(|e| {
                format!(
                    "a DynamoDB table at {} (moto's server: scripts/services.sh): {e}",
                    idem_tests::dynamodb_url()
                )
            })?;
    }
    let store = DynamoStore::new(client.clone(), &tables[0]);
    let engine = Engine::new(store).with_policy(Policy::default().ttl(Duration::from_mins(10)));
    // Balances in memory on both sides, each debit applied and then
    // recorded, as in the Redis pair.
    let ledger = Unfenced(MemoryLedger::new(&MemoryStore::new()));
    let naive = naive_router(Naive {
        app: crate::app_on(MemoryStore::new()),
        keys: DynamoKeys {
            client: client.clone(),
            table: Arc::from(tables[1].as_str()),
        },
    });
    Ok((
        idem_tests::serve(naive).await,
        idem_tests::serve(router(app_with(engine, Arc::new(ledger)))).await,
    ))
}

/// Runs the pair, then deletes the run's tables.
pub(crate) fn run(rt: &tokio::runtime::Runtime, script: &str) -> Result<(), String> {
    let client = idem_tests::dynamodb_client();
    let tables = tables();
    let compared = rt
        .block_on(pair(&client, &tables))
        .and_then(|(naive, idem)| {
            compare(
                "dynamodb",
                [
                    "conditional PutItem + PutItem (baseline)",
                    "with idem (DynamoStore)",
                ],
                [&naive, &idem],
                script,
                Some("moto_server"),
            )
        });
    for table in &tables {
        let _ = rt.block_on(client.delete_table().table_name(table).send());
    }
    compared
}
