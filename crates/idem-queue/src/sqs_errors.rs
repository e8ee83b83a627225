//! What SQS's errors mean to a consumer: a call that failed, and whether
//! retrying can fix it (`idem_queue::sqs`).

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

use crate::delivery::BrokerError;
use crate::running::Ended;

/// The error of the SQS call `what`.
pub(crate) fn broker<E, R>(what: &'static str) -> impl FnOnce(SdkError<E, R>) -> BrokerError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    move |e| BrokerError::new(format!("sqs {what}"), e)
}

/// SQS's answers that retrying cannot fix.
const REFUSED: [&str; 6] = [
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
];

/// How a session ends when the SQS call `what` fails: refused if retrying
/// cannot fix it (a missing queue, credentials, permissions), else lost.
pub(crate) fn ended<E, R>(what: &'static str) -> impl FnOnce(SdkError<E, R>) -> Ended
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    move |e| {
        let refused = e
            .as_service_error()
            .and_then(ProvideErrorMetadata::code)
            .is_some_and(|c| REFUSED.contains(&c));
        let e = broker(what)(e);
        if refused {
            Ended::Refused(e)
        } else {
            Ended::Lost(e)
        }
    }
}
