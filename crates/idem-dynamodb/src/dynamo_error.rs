//! What DynamoDB's errors mean to idem: throttling and lost connections are
//! transient (a retry may succeed: 503, never 500), a transaction that met
//! another is a conflict, an item too large is full.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use idem_core::store::StoreError;

/// The codes DynamoDB answers when it sheds load.
const THROTTLED: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
];

/// `e`, from the call named `what`, as a store error.
pub(crate) fn store_error<E, R>(what: &str, e: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let service = match e {
        SdkError::ServiceError(service) => service.into_err(),
        other => {
            // Never answered: the request was not sent, timed out, or its
            // answer was lost. Whether a write landed is not known; the
            // engine treats the step as failed, and a retry finds out.
            return StoreError::unavailable(format!("DynamoDB {what}: no answer"), other);
        }
    };
    let code = service.code().unwrap_or("").to_owned();
    let message = service.message().unwrap_or("").to_owned();
    if THROTTLED.contains(&code.as_str()) {
        return StoreError::unavailable(
            format!("DynamoDB {what}: throttled ({code}): retry after a pause"),
            service,
        );
    }
    match code.as_str() {
        "TransactionConflictException" | "TransactionInProgressException" => {
            StoreError::conflict(format!("DynamoDB {what}: {code}: {message}"))
        }
        "ItemCollectionSizeLimitExceededException" => {
            StoreError::full_because(format!("DynamoDB {what}: {code}: {message}"))
        }
        "ValidationException" if message.contains("size") => {
            StoreError::full_because(format!("DynamoDB {what}: the item is too large: {message}"))
        }
        "ResourceNotFoundException" => StoreError::unavailable(
            format!("DynamoDB {what}: the table does not exist: {message}"),
            service,
        ),
        _ => StoreError::unavailable(format!("DynamoDB {what}: {code}: {message}"), service),
    }
}
