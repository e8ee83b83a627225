//! Each transition of `idem_core::machine` as DynamoDB calls (ADR 0013):
//! the common case in one conditional write whose condition is the
//! table's row, and, when that condition fails, the item it failed on
//! (`ALL_OLD`) read into a [`Record`] and answered by
//! [`machine::step`] itself. Where `step` still asks for a write (a claim
//! whose token must be the previous one plus one), it is written
//! conditioned on the item being exactly the one read.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use idem_core::machine::{self, micros, Answer, Effect, Event, Record};
use idem_core::store::StoreError;
use idem_core::RecordId;

use crate::dynamo_error::store_error;
use crate::item::{
    deadlines, item_of, key, n, record_of, Item, COMPLETED, EXPIRES, IN_FLIGHT, OUTCOME, PK, STATE,
    TOKEN, TRACED, UNTIL,
};

/// How many times a write conditioned on the item read is tried before the
/// store answers that the record is too busy (each miss means another
/// writer changed it in between).
const ATTEMPTS: usize = 16;

/// The caller's clock, in microseconds since the epoch (ADR 0013: DynamoDB
/// has no clock a condition can read).
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| micros(d).max(1))
}

/// The attribute names every expression uses (some are DynamoDB's
/// reserved words).
pub(crate) fn names() -> HashMap<String, String> {
    [PK, TOKEN, STATE, UNTIL, TRACED, OUTCOME, EXPIRES]
        .into_iter()
        .map(|a| (format!("#{a}"), a.to_owned()))
        .collect()
}

/// A table and the client that reaches it.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub(crate) client: Client,
    pub(crate) name: std::sync::Arc<str>,
}

/// What a conditional write found.
enum Written {
    /// The condition held; the write is done.
    Done,
    /// The condition failed on this item (`None`: there was none).
    Found(Option<Record>),
}

impl Table {
    /// Applies `event` to record `id` at `now`: `fast` is the common case's
    /// write, conditioned on the table's row for it; when its condition
    /// fails, the item it failed on decides, through `machine::step`.
    pub(crate) async fn apply(
        &self,
        id: &RecordId,
        event: Event<'_>,
        fast: Option<Fast>,
    ) -> Result<Answer, StoreError> {
        let mut found = match fast {
            Some(fast) => {
                let now = fast.now;
                match self.fast(id, fast).await? {
                    Written::Done => return Ok(fast_answer(event, now)),
                    Written::Found(record) => (record, now),
                }
            }
            None => (self.read(id).await?, now()),
        };
        for _ in 0..ATTEMPTS {
            let (record, at) = found;
            let (answer, effect) = machine::step(record.as_ref(), at, event);
            let Effect::Put(next) = effect else {
                return Ok(answer);
            };
            match self.swap(id, record.as_ref(), &next).await? {
                Written::Done => return Ok(answer),
                Written::Found(again) => found = (again, now()),
            }
        }
        Err(StoreError::unavailable_because(format!(
            "DynamoDB: the record {id} changed under {ATTEMPTS} writes in a row; retry"
        )))
    }

    /// Reads record `id` (strongly consistent).
    pub(crate) async fn read(&self, id: &RecordId) -> Result<Option<Record>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&*self.name)
            .key(PK, key(id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| store_error("GetItem", e))?;
        got.item().map(record_of).transpose()
    }

    /// Writes `next` in place of `read`, only if the item is still exactly
    /// `read` (absent, or the same token, state and deadline).
    async fn swap(
        &self,
        id: &RecordId,
        read: Option<&Record>,
        next: &Record,
    ) -> Result<Written, StoreError> {
        let mut values = HashMap::new();
        let (condition, used): (&str, &[&str]) = match read {
            None => ("attribute_not_exists(#pk)", &[PK]),
            Some(r) => {
                let (state, until, _) = deadlines(r);
                values.insert(":tok".to_owned(), n(r.token.0));
                values.insert(":st".to_owned(), AttributeValue::S(state.to_owned()));
                values.insert(":until".to_owned(), n(until));
                (
                    "#tok = :tok AND #st = :st AND #until = :until",
                    &[TOKEN, STATE, UNTIL],
                )
            }
        };
        let sent = self
            .client
            .put_item()
            .table_name(&*self.name)
            .set_item(Some(item_of(id, next)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(used_names(used)))
            .set_expression_attribute_values((!values.is_empty()).then_some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        put_written(sent)
    }

    /// The common case's write.
    async fn fast(&self, id: &RecordId, fast: Fast) -> Result<Written, StoreError> {
        match fast.write {
            FastWrite::Put(item) => {
                let sent = self
                    .client
                    .put_item()
                    .table_name(&*self.name)
                    .set_item(Some(item))
                    .condition_expression(fast.condition)
                    .set_expression_attribute_names(Some(used_names(fast.names)))
                    .set_expression_attribute_values(Some(fast.values))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .send()
                    .await;
                put_written(sent)
            }
            FastWrite::Update(update) => {
                let sent = self
                    .client
                    .update_item()
                    .table_name(&*self.name)
                    .key(PK, key(id))
                    .update_expression(update)
                    .condition_expression(fast.condition)
                    .set_expression_attribute_names(Some(used_names(fast.names)))
                    .set_expression_attribute_values(Some(fast.values))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .send()
                    .await;
                match sent {
                    Ok(_) => Ok(Written::Done),
                    Err(e) => match e.as_service_error() {
                        Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                            Ok(Written::Found(failed.item().map(record_of).transpose()?))
                        }
                        _ => Err(store_error("UpdateItem", e)),
                    },
                }
            }
        }
    }
}

/// The answer of a fast write whose condition held: the row of the table
/// it was conditioned on.
fn fast_answer(event: Event<'_>, now: u64) -> Answer {
    match event {
        Event::Begin { lease, .. } => {
            Answer::Begin(idem_core::store::Begin::Acquired(idem_core::Lease {
                token: idem_core::FencingToken(now),
                duration: lease,
            }))
        }
        Event::Complete { .. } => Answer::Completed,
        Event::Release { .. } => Answer::Released,
        Event::Renew { lease, duration } => Answer::Renewed(idem_core::Lease {
            token: lease.token,
            duration,
        }),
        Event::Remove { .. } => Answer::Removed,
    }
}

fn put_written(
    sent: Result<
        aws_sdk_dynamodb::operation::put_item::PutItemOutput,
        aws_sdk_dynamodb::error::SdkError<
            PutItemError,
            aws_sdk_dynamodb::config::http::HttpResponse,
        >,
    >,
) -> Result<Written, StoreError> {
    match sent {
        Ok(_) => Ok(Written::Done),
        Err(e) => match e.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                Ok(Written::Found(failed.item().map(record_of).transpose()?))
            }
            _ => Err(store_error("PutItem", e)),
        },
    }
}

/// The `#name` placeholders of `names`.
fn used_names(names: &[&str]) -> HashMap<String, String> {
    let all = crate::transitions::names();
    names
        .iter()
        .filter_map(|a| all.get_key_value(&format!("#{a}")))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The common case of a transition as one conditional write.
pub(crate) struct Fast {
    /// The caller's clock when the write was made.
    pub(crate) now: u64,
    pub(crate) write: FastWrite,
    pub(crate) condition: &'static str,
    pub(crate) names: &'static [&'static str],
    pub(crate) values: HashMap<String, AttributeValue>,
}

/// A fast write: a whole item, or an update of the one there.
pub(crate) enum FastWrite {
    Put(Item),
    Update(&'static str),
}

/// A claim on a record neither live nor traced whose token is below `now`
/// (the common case: a new key): the item in flight with token `now`.
pub(crate) fn claim(id: &RecordId, fingerprint: &idem_core::Fingerprint, lease: Duration) -> Fast {
    let now = now();
    let record = Record {
        fingerprint: *fingerprint,
        token: idem_core::FencingToken(now),
        state: machine::RecordState::InFlight {
            lease_until: now.saturating_add(micros(lease)),
        },
    };
    Fast {
        now,
        write: FastWrite::Put(item_of(id, &record)),
        condition: "attribute_not_exists(#pk) OR (#traced <= :now AND #tok < :now)",
        names: &[PK, TRACED, TOKEN],
        values: HashMap::from([(":now".to_owned(), n(now))]),
    }
}

/// The holder's live, in-flight claim: the condition of complete, release
/// and renew.
const HOLDER_LIVE: &str = "#tok = :tok AND #st = :inflight AND #until > :now";

/// Completes the holder's claim with `outcome` for `ttl`, traced `trace`
/// longer.
pub(crate) fn complete(
    lease: &idem_core::Lease,
    outcome: &idem_core::Outcome,
    ttl: Duration,
    trace: Duration,
) -> Fast {
    let now = now();
    let expires_at = now.saturating_add(micros(ttl));
    let traced = expires_at.saturating_add(micros(trace));
    Fast {
        now,
        write: FastWrite::Update(
            "SET #st = :completed, #until = :until, #traced = :traced, #out = :out, \
             #expires = :expires",
        ),
        condition: HOLDER_LIVE,
        names: &[TOKEN, STATE, UNTIL, TRACED, OUTCOME, EXPIRES],
        values: HashMap::from([
            (":now".to_owned(), n(now)),
            (":tok".to_owned(), n(lease.token.0)),
            (
                ":inflight".to_owned(),
                AttributeValue::S(IN_FLIGHT.to_owned()),
            ),
            (
                ":completed".to_owned(),
                AttributeValue::S(COMPLETED.to_owned()),
            ),
            (":until".to_owned(), n(expires_at)),
            (":traced".to_owned(), n(traced)),
            (
                ":out".to_owned(),
                crate::item::b(outcome.as_bytes().to_vec()),
            ),
            (
                ":expires".to_owned(),
                n(traced.max(lease.token.0) / 1_000_000 + 1),
            ),
        ]),
    }
}

/// Moves the holder's lease's end to `until` (`now`: released).
pub(crate) fn lease_until(lease: &idem_core::Lease, now: u64, until: u64) -> Fast {
    Fast {
        now,
        write: FastWrite::Update("SET #until = :until, #traced = :until, #expires = :expires"),
        condition: HOLDER_LIVE,
        names: &[TOKEN, STATE, UNTIL, TRACED, EXPIRES],
        values: HashMap::from([
            (":now".to_owned(), n(now)),
            (":tok".to_owned(), n(lease.token.0)),
            (
                ":inflight".to_owned(),
                AttributeValue::S(IN_FLIGHT.to_owned()),
            ),
            (":until".to_owned(), n(until)),
            (
                ":expires".to_owned(),
                n(until.max(lease.token.0) / 1_000_000 + 1),
            ),
        ]),
    }
}
