//! The records' table: made by [`create_table`], or checked at start by
//! [`check_table`], so that a table made by something else fails at once
//! with a message that says what is wrong.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use crate::item::{EXPIRES, PK};

/// Why the records' table cannot be used.
#[derive(Debug)]
pub struct TableError {
    table: String,
    why: String,
}

impl TableError {
    fn new(table: &str, why: impl Into<String>) -> Self {
        Self {
            table: table.to_owned(),
            why: why.into(),
        }
    }
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the DynamoDB table `{}` cannot hold idem's records: {}",
            self.table, self.why
        )
    }
}

impl std::error::Error for TableError {}

/// Makes the table `table` for idem's records if it does not exist (on
/// demand capacity, its partition key `pk` binary), waits until it is
/// active, and turns its time to live on, on `expires`. Then checks it
/// ([`check_table`]).
///
/// # Errors
///
/// DynamoDB refused (its message says why), or the table exists and is
/// not one idem made.
pub async fn create_table(client: &Client, table: &str) -> Result<(), TableError> {
    let created = client
        .create_table()
        .table_name(table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(PK)
                .attribute_type(ScalarAttributeType::B)
                .build()
                .map_err(|e| TableError::new(table, e.to_string()))?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(PK)
                .key_type(KeyType::Hash)
                .build()
                .map_err(|e| TableError::new(table, e.to_string()))?,
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    if let Err(e) = created {
        let exists = e
            .as_service_error()
            .is_some_and(aws_sdk_dynamodb::operation::create_table::CreateTableError::is_resource_in_use_exception);
        if !exists {
            return Err(TableError::new(
                table,
                format!("CreateTable: {}", describe(&e)),
            ));
        }
    }
    wait_active(client, table).await?;
    let ttl = TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(EXPIRES)
        .build()
        .map_err(|e| TableError::new(table, e.to_string()))?;
    if let Err(e) = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await
    {
        // Already on (on `expires`) is what was asked.
        let text = describe(&e);
        if !text.contains("already enabled") {
            return Err(TableError::new(table, format!("UpdateTimeToLive: {text}")));
        }
    }
    check_table(client, table).await
}

/// Checks that `table` exists and is keyed as idem keys its records (a
/// partition key `pk`, binary, and no sort key).
///
/// # Errors
///
/// The table is missing, or keyed otherwise: the message says which.
pub async fn check_table(client: &Client, table: &str) -> Result<(), TableError> {
    let described = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| TableError::new(table, format!("DescribeTable: {}", describe(&e))))?;
    let Some(description) = described.table() else {
        return Err(TableError::new(table, "DescribeTable answered no table"));
    };
    let keys = description.key_schema();
    let partition_only =
        keys.len() == 1 && keys[0].attribute_name() == PK && keys[0].key_type() == &KeyType::Hash;
    let binary = description
        .attribute_definitions()
        .iter()
        .any(|a| a.attribute_name() == PK && a.attribute_type() == &ScalarAttributeType::B);
    if !partition_only || !binary {
        let found: Vec<String> = keys
            .iter()
            .map(|k| format!("{} ({})", k.attribute_name(), k.key_type().as_str()))
            .collect();
        return Err(TableError::new(
            table,
            format!(
                "it was made by something else: its key is {}, where idem's is one binary \
                 partition key `{PK}`",
                found.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Waits (ten seconds at most) until a new table is active.
async fn wait_active(client: &Client, table: &str) -> Result<(), TableError> {
    for _ in 0..100 {
        let described = client.describe_table().table_name(table).send().await;
        if let Ok(d) = described {
            if d.table()
                .and_then(|t| t.table_status())
                .map(aws_sdk_dynamodb::types::TableStatus::as_str)
                == Some("ACTIVE")
            {
                return Ok(());
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(TableError::new(
        table,
        "it did not become active within ten seconds",
    ))
}

/// An SDK error's code and message.
fn describe<E, R>(e: &aws_sdk_dynamodb::error::SdkError<E, R>) -> String
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error,
    R: std::fmt::Debug,
{
    match e.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or("")
        ),
        None => format!("no answer ({e})"),
    }
}
