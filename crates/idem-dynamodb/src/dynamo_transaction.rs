//! `DynamoTransaction`: an operation's own writes and its record's
//! completion, committed in one `TransactWriteItems`.

use std::time::Duration;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};
use idem_core::machine::{self, Answer, Event};
use idem_core::store::{async_trait, StoreError};
use idem_core::{Lease, Outcome, RecordId, StoreTransaction};
use sha2::{Digest as _, Sha256};

use crate::dynamo_error::store_error;
use crate::item::{key, refuse_oversized, PK};
use crate::transitions::{complete, FastWrite, Table};

/// DynamoDB's limit on the items of one transaction.
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// The application's writes (`Put`, `Update`, `Delete`, `ConditionCheck`
/// items, [`push`](Self::push)) and the record's completion, committed
/// together by one `TransactWriteItems`, the completion conditioned on the
/// holder's claim being live: the writes land with the record while the
/// claim holds, or not at all. Made by
/// [`DynamoStore::transaction`](crate::DynamoStore::transaction); committed
/// by [`Claim::commit`](idem_core::Claim::commit) (or an adapter's
/// `commit_response`).
///
/// A commit whose answer was lost is sent again with the same
/// `ClientRequestToken` (derived from the record and the claim's token), so
/// that DynamoDB applies it once.
#[derive(Debug)]
pub struct DynamoTransaction {
    table: Table,
    trace: Duration,
    max_outcome: usize,
    writes: Vec<TransactWriteItem>,
    /// The record completed in it: its id, lease and outcome, and where in
    /// `writes` its update is.
    completion: Option<(RecordId, Lease, Outcome, Duration, usize)>,
}

impl DynamoTransaction {
    pub(crate) fn new(table: Table, trace: Duration, max_outcome: usize) -> Self {
        Self {
            table,
            trace,
            max_outcome,
            writes: Vec::new(),
            completion: None,
        }
    }

    /// Adds one of the application's writes.
    pub fn push(&mut self, write: TransactWriteItem) -> &mut Self {
        self.writes.push(write);
        self
    }

    /// The writes so far, the record's completion included once made.
    pub fn writes(&self) -> &[TransactWriteItem] {
        &self.writes
    }

    /// The idempotency token of the commit: the record and its claim.
    fn request_token(id: &RecordId, lease: &Lease) -> String {
        let mut h = Sha256::new();
        h.update(id.as_bytes());
        h.update(lease.token.0.to_be_bytes());
        let digest = h.finalize();
        digest[..18]
            .iter()
            .fold(String::with_capacity(36), |mut hex, b| {
                use std::fmt::Write as _;
                let _ = write!(hex, "{b:02x}");
                hex
            })
    }

    /// After a cancelled transaction whose record condition failed: the
    /// record as it is says whether this claim completed it already (a
    /// commit sent again after its answer was lost).
    async fn completed_already(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let record = self.table.read(id).await?;
        let event = Event::Complete {
            lease,
            outcome,
            ttl,
            trace: self.trace,
        };
        let (answer, _) = machine::step(record.as_ref(), crate::transitions::now(), event);
        Ok(matches!(
            (answer, record.map(|r| r.state)),
            (
                Answer::Completed,
                Some(machine::RecordState::Completed { .. })
            )
        ))
    }
}

#[async_trait]
impl StoreTransaction for DynamoTransaction {
    async fn complete(
        &mut self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        refuse_oversized(outcome, self.max_outcome)?;
        if self.completion.is_some() {
            return Err(StoreError::unsupported_because(
                "a DynamoDB transaction completes one record",
            ));
        }
        if self.writes.len() + 1 > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::unsupported_because(format!(
                "a DynamoDB transaction holds at most {MAX_TRANSACTION_ITEMS} items, the record's \
                 included"
            )));
        }
        let fast = complete(lease, outcome, ttl, self.trace);
        let FastWrite::Update(expression) = fast.write else {
            return Err(StoreError::corrupt("a completion that is not an update"));
        };
        let names = fast
            .names
            .iter()
            .map(|a| (format!("#{a}"), (*a).to_owned()))
            .collect();
        let update = Update::builder()
            .table_name(&*self.table.name)
            .key(PK, key(id))
            .update_expression(expression)
            .condition_expression(fast.condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(fast.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::corrupt(format!("a DynamoDB completion: {e}")))?;
        self.completion = Some((*id, *lease, outcome.clone(), ttl, self.writes.len()));
        self.writes
            .push(TransactWriteItem::builder().update(update).build());
        Ok(())
    }

    async fn commit(self) -> Result<(), StoreError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let mut call = self
            .table
            .client
            .transact_write_items()
            .set_transact_items(Some(self.writes.clone()));
        if let Some((id, lease, ..)) = &self.completion {
            call = call.client_request_token(Self::request_token(id, lease));
        }
        let Err(e) = call.send().await else {
            return Ok(());
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            e.as_service_error()
        else {
            return Err(store_error("TransactWriteItems", e));
        };
        let reasons = cancelled.cancellation_reasons();
        let failed = |i: usize| {
            reasons
                .get(i)
                .and_then(|r| r.code())
                .is_some_and(|c| c == "ConditionalCheckFailed")
        };
        if let Some((id, lease, outcome, ttl, at)) = &self.completion {
            if failed(*at) {
                if self.completed_already(id, lease, outcome, *ttl).await? {
                    return Ok(());
                }
                return Err(StoreError::lease_lost());
            }
        }
        let codes: Vec<&str> = reasons.iter().filter_map(|r| r.code()).collect();
        if codes
            .iter()
            .any(|c| *c == "ConditionalCheckFailed" || *c == "TransactionConflict")
        {
            return Err(StoreError::conflict(format!(
                "a DynamoDB transaction's item ({})",
                codes.join(", ")
            )));
        }
        Err(StoreError::unavailable_because(format!(
            "DynamoDB cancelled the transaction, nothing applied ({}); retry after a pause",
            codes.join(", ")
        )))
    }

    async fn rollback(self) -> Result<(), StoreError> {
        // Nothing was sent.
        Ok(())
    }
}
