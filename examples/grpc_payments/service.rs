//! The gRPC payments service, `payments.v1.Ledger`: the HTTP example's
//! ledger behind gRPC, with `Debit` made idempotent by
//! `idem_tonic::IdempotencyLayer`.
//!
//! ```proto
//! package payments.v1;
//! service Ledger {
//!   rpc Debit(DebitRequest) returns (Receipt);          // idempotent
//!   rpc GetBalance(BalanceRequest) returns (Account);
//! }
//! message DebitRequest   { string account = 1; uint64 amount = 2; }
//! message Receipt        { string debit_id = 1; string account = 2; uint64 amount = 3; uint64 balance = 4; }
//! message BalanceRequest { string account = 1; }
//! message Account        { string id = 1; uint64 balance = 2; }
//! ```
//!
//! `Debit` needs `idempotency-key` metadata; the key is scoped by the
//! account, so the same key on two accounts is two debits. It answers the
//! receipt, `FAILED_PRECONDITION` for insufficient funds (recorded and
//! replayed like a receipt), `INVALID_ARGUMENT` for a malformed account or
//! amount (recorded), and `UNAVAILABLE` if the ledger failed (not recorded:
//! a retry debits).

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Claim, Engine, Scope};
use idem_tonic::IdempotencyLayer;
use prost::Message as _;
use tonic::{Request, Response, Status};

use crate::payments::{Ledger, LedgerError, MAX_AMOUNT};

/// A debit request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebitRequest {
    /// The account to debit.
    #[prost(string, tag = "1")]
    pub account: String,
    /// Minor units to debit; at least 1.
    #[prost(uint64, tag = "2")]
    pub amount: u64,
}

/// The receipt of a debit.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Receipt {
    /// Unique per debit: the record's address and the claim's fencing token.
    #[prost(string, tag = "1")]
    pub debit_id: String,
    /// The account debited.
    #[prost(string, tag = "2")]
    pub account: String,
    /// The amount debited.
    #[prost(uint64, tag = "3")]
    pub amount: u64,
    /// The balance after the debit.
    #[prost(uint64, tag = "4")]
    pub balance: u64,
}

/// A balance request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BalanceRequest {
    /// The account.
    #[prost(string, tag = "1")]
    pub account: String,
}

/// An account and its balance.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Account {
    /// The account id.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Its balance.
    #[prost(uint64, tag = "2")]
    pub balance: u64,
}

/// The server and client tonic-build generated (`examples/build.rs`).
#[allow(clippy::pedantic)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/payments.v1.Ledger.rs"));
}
pub use generated::{ledger_client, ledger_server};

/// The full name of the idempotent method.
pub const DEBIT: &str = "/payments.v1.Ledger/Debit";

/// The service: the ledger, and a simulated payment-provider delay inside
/// each debit.
pub struct Payments {
    /// The balances.
    pub ledger: Arc<dyn Ledger>,
    /// A simulated payment-provider delay inside each debit.
    pub debit_delay: Duration,
}

/// The layer that makes `Debit` idempotent over `engine`, scoped by the
/// debit's account.
pub fn idempotency(engine: Engine) -> IdempotencyLayer {
    IdempotencyLayer::new(engine)
        .method(DEBIT)
        .scope(|_, message| {
            let request = DebitRequest::decode(message).map_err(|e| {
                Status::invalid_argument(format!("the debit request does not decode: {e}"))
            })?;
            Ok(Scope::new(request.account))
        })
}

fn check_account(id: &str) -> Result<(), Status> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Status::invalid_argument(
            "an account id has 1 to 64 letters, digits, `-` or `_`",
        ))
    }
}

fn ledger_status(e: &LedgerError) -> Status {
    match e {
        LedgerError::InsufficientFunds { .. } => Status::failed_precondition(e.to_string()),
        LedgerError::Unavailable(_) => Status::unavailable(e.to_string()),
    }
}

#[tonic::async_trait]
impl ledger_server::Ledger for Payments {
    async fn debit(&self, request: Request<DebitRequest>) -> Result<Response<Receipt>, Status> {
        // The layer put the claim in the extensions: its fencing token names
        // this debit.
        let debit_id = request.extensions().get::<Claim>().map_or_else(
            || "dbt_unprotected".to_owned(),
            |claim| {
                format!(
                    "dbt_{}_{}",
                    &claim.record_id().to_hex()[..16],
                    claim.fencing_token()
                )
            },
        );
        let DebitRequest { account, amount } = request.into_inner();
        check_account(&account)?;
        if amount == 0 || amount > MAX_AMOUNT {
            return Err(Status::invalid_argument(format!(
                "send an amount from 1 to {MAX_AMOUNT}"
            )));
        }
        if !self.debit_delay.is_zero() {
            tokio::time::sleep(self.debit_delay).await;
        }
        // On PostgreSQL the debit's transaction goes to the layer, which
        // records the receipt in it and commits: a crash leaves both or
        // neither, never a debit without its record.
        let balance = self
            .ledger
            .debit_committed_by(&account, amount, &|tx| {
                Box::pin(async move {
                    idem_tonic::commit_with_record(tx)
                        .await
                        .map_err(|s| LedgerError::Unavailable(s.message().to_owned()))
                })
            })
            .await
            .map_err(|e| ledger_status(&e))?;
        Ok(Response::new(Receipt {
            debit_id,
            account,
            amount,
            balance,
        }))
    }

    async fn get_balance(
        &self,
        request: Request<BalanceRequest>,
    ) -> Result<Response<Account>, Status> {
        let BalanceRequest { account } = request.into_inner();
        check_account(&account)?;
        let balance = self
            .ledger
            .balance(&account)
            .await
            .map_err(|e| ledger_status(&e))?;
        Ok(Response::new(Account {
            id: account,
            balance,
        }))
    }
}

/// Serves the service on `listener` until the process ends. Requests may
/// come gzip-compressed (`grpc-encoding: gzip`); answers are sent
/// uncompressed: a recorded answer is replayed to every retry, and a retry
/// may come from a client that does not accept gzip.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Engine,
    payments: Payments,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .layer(idempotency(engine))
        .add_service(
            ledger_server::LedgerServer::new(payments)
                .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
        )
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await
}
