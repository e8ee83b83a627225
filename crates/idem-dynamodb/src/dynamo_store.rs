//! `DynamoStore`: idem's records in a DynamoDB table, one item a record
//! (ADR 0013).

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use idem_core::machine::{micros, Answer, Event, Record, RecordState};
use idem_core::store::{async_trait, Begin, StoreError, StoreFuture};
use idem_core::{
    Fingerprint, Lease, Outcome, RecordId, RecordInfo, RecordInfoState, Removal, Store,
};

use crate::dynamo_transaction::DynamoTransaction;
use crate::item::{refuse_oversized, MAX_OUTCOME_BYTES};
use crate::transitions::{claim, complete, lease_until, now, Table};

/// How long a completed record refuses a retry as expired once its
/// lifetime is over, by default (a day), so that a retry arriving after the
/// record expired is refused rather than run again.
pub const DEFAULT_TRACE: Duration = Duration::from_hours(24);

/// idem's records in the DynamoDB table `table`: a claim is one conditional
/// write, a duplicate learns what it found in the same round trip, and an
/// effect commits with its record in one `TransactWriteItems`
/// ([`DynamoStore::transaction`]). Time is the caller's clock; records are
/// deleted by the table's TTL on `expires` ([`create_table`](crate::create_table)
/// turns it on), and every condition compares the deadline itself, since the
/// TTL deletes late.
///
/// ```no_run
/// use idem_dynamodb::aws_sdk_dynamodb::{config::BehaviorVersion, config::Region, Client, Config};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // Usually `aws_config::load_from_env()`: the role's credentials and region.
/// let config = Config::builder()
///     .behavior_version(BehaviorVersion::latest())
///     .region(Region::new("eu-west-1"))
///     .build();
/// let client = Client::from_conf(config);
/// idem_dynamodb::create_table(&client, "idem_records").await?;
/// let store = idem_dynamodb::DynamoStore::new(client, "idem_records");
/// let engine = idem_core::Engine::new(store);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct DynamoStore {
    table: Table,
    trace: Duration,
    max_outcome: usize,
}

impl DynamoStore {
    /// A store on `table`, reached through `client` (the application's:
    /// its region, credentials and HTTP client). Nothing is sent until the
    /// first call; [`check_table`](crate::check_table) checks the table at
    /// start.
    pub fn new(client: Client, table: &str) -> Self {
        Self {
            table: Table {
                client,
                name: Arc::from(table),
            },
            trace: DEFAULT_TRACE,
            max_outcome: MAX_OUTCOME_BYTES,
        }
    }

    /// Keeps outcomes of at most `bytes` (at most [`MAX_OUTCOME_BYTES`],
    /// what fits an item): a larger one is refused as full and not
    /// recorded, so that retries get `response-not-recorded`. Below the
    /// item limit for a table whose items carry more, or for an emulator
    /// that counts an item's size otherwise (moto's server refuses an
    /// update of about 250 KB).
    #[must_use]
    pub fn with_max_outcome(mut self, bytes: usize) -> Self {
        self.max_outcome = bytes.min(MAX_OUTCOME_BYTES);
        self
    }

    /// Keeps a completed record `trace` past its expiry, refusing a late
    /// retry as expired rather than running it again (default a day; zero
    /// keeps none).
    #[must_use]
    pub fn with_trace(mut self, trace: Duration) -> Self {
        self.trace = trace;
        self
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table.name
    }

    /// The client the store calls.
    pub fn client(&self) -> &Client {
        &self.table.client
    }

    /// A transaction that commits the application's own writes with a
    /// record's completion in one `TransactWriteItems`
    /// ([`Claim::commit`](idem_core::Claim::commit)).
    pub fn transaction(&self) -> DynamoTransaction {
        DynamoTransaction::new(self.table.clone(), self.trace, self.max_outcome)
    }

    async fn ended(
        &self,
        id: &RecordId,
        event: Event<'_>,
        fast: Option<crate::transitions::Fast>,
    ) -> Result<(), StoreError> {
        match self.table.apply(id, event, fast).await? {
            Answer::Completed | Answer::Released => Ok(()),
            _ => Err(StoreError::lease_lost()),
        }
    }
}

/// A record's state for an operator: live only.
pub(crate) fn info(record: Record, now: u64) -> Option<RecordInfo> {
    if !record.is_live(now) {
        return None;
    }
    let state = match record.state {
        RecordState::InFlight { lease_until } => RecordInfoState::InFlight {
            lease_left: Duration::from_micros(lease_until - now),
        },
        RecordState::Completed {
            outcome,
            expires_at,
            ..
        } => RecordInfoState::Completed {
            expires_in: Duration::from_micros(expires_at - now),
            outcome,
        },
    };
    Some(RecordInfo {
        fingerprint: record.fingerprint,
        token: record.token,
        state,
    })
}

#[async_trait]
impl Store for DynamoStore {
    fn begin(
        &self,
        id: &RecordId,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> StoreFuture<Begin> {
        let (table, id, fingerprint) = (self.table.clone(), *id, *fingerprint);
        StoreFuture::boxed(async move {
            let fast = claim(&id, &fingerprint, lease);
            let event = Event::Begin {
                fingerprint: &fingerprint,
                lease,
            };
            match table.apply(&id, event, Some(fast)).await? {
                Answer::Begin(begin) => Ok(begin),
                other => Err(StoreError::corrupt(format!(
                    "a claim was answered {other:?}"
                ))),
            }
        })
    }

    fn complete(
        &self,
        id: &RecordId,
        lease: &Lease,
        outcome: &Outcome,
        ttl: Duration,
    ) -> StoreFuture<()> {
        let (store, id, lease, outcome) = (self.clone(), *id, *lease, outcome.clone());
        StoreFuture::boxed(async move {
            refuse_oversized(&outcome, store.max_outcome)?;
            let fast = complete(&lease, &outcome, ttl, store.trace);
            let event = Event::Complete {
                lease: &lease,
                outcome: &outcome,
                ttl,
                trace: store.trace,
            };
            store.ended(&id, event, Some(fast)).await
        })
    }

    async fn release(&self, id: &RecordId, lease: &Lease) -> Result<(), StoreError> {
        let now = now();
        let fast = lease_until(lease, now, now);
        self.ended(id, Event::Release { lease }, Some(fast)).await
    }

    async fn renew(
        &self,
        id: &RecordId,
        lease: &Lease,
        duration: Duration,
    ) -> Result<Lease, StoreError> {
        let now = now();
        let fast = lease_until(lease, now, now.saturating_add(micros(duration)));
        match self
            .table
            .apply(id, Event::Renew { lease, duration }, Some(fast))
            .await?
        {
            Answer::Renewed(renewed) => Ok(renewed),
            _ => Err(StoreError::lease_lost()),
        }
    }

    fn wakes(&self) -> bool {
        false
    }

    async fn changed(&self, _id: &RecordId, within: Duration) -> Option<RecordInfo> {
        // Nothing wakes a DynamoDB waiter (ADR 0013): the engine polls.
        tokio::time::sleep(within).await;
        None
    }

    fn name(&self) -> &'static str {
        "dynamodb"
    }

    async fn inspect(&self, id: &RecordId) -> Result<Option<RecordInfo>, StoreError> {
        Ok(self.table.read(id).await?.and_then(|r| info(r, now())))
    }

    async fn remove(&self, id: &RecordId, force: bool) -> Result<Removal, StoreError> {
        Ok(
            match self.table.apply(id, Event::Remove { force }, None).await? {
                Answer::Removed => Removal::Removed,
                Answer::RemoveRefused => Removal::RefusedInFlight,
                _ => Removal::Absent,
            },
        )
    }
}
