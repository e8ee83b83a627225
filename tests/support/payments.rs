//! `Payments`: one client of the payments example's HTTP API
//! (`examples/payments`: `POST /accounts/{account}/debits` under an
//! `Idempotency-Key`, `GET /accounts/{account}`), for every test that debits
//! an account and reads its balance.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore};
use idem_examples::payments::{router, App, MemoryLedger};

use crate::serving::serve;

/// The payments example on `store` (its records and its ledger), served on
/// a free port: its address.
pub async fn payments_on_memory(store: MemoryStore) -> String {
    serve(router(App {
        engine: Engine::new(store.clone()),
        ledger: Arc::new(MemoryLedger::new(&store)),
        debit_delay: Duration::ZERO,
        provider: None,
    }))
    .await
}

/// A client of one payments instance.
#[derive(Clone, Debug)]
pub struct Payments {
    http: reqwest::Client,
    url: String,
}

impl Payments {
    /// A client of the instance at `url` (`http://127.0.0.1:port`).
    pub fn new(url: impl Into<String>) -> Self {
        Self::with_client(reqwest::Client::new(), url)
    }

    /// A client of the instance at `url` through `http` (a client with a
    /// timeout, or one shared by a test's tasks).
    pub fn with_client(http: reqwest::Client, url: impl Into<String>) -> Self {
        Self {
            http,
            url: url.into(),
        }
    }

    /// The instance's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends `body` as a debit of `account` under `key`: the answer, or the
    /// transport's error (the instance died, the client's timeout passed).
    ///
    /// # Errors
    ///
    /// What reqwest says of a request that got no answer.
    pub async fn try_debit_body(
        &self,
        account: &str,
        key: &str,
        body: &str,
    ) -> reqwest::Result<reqwest::Response> {
        self.http
            .post(format!("{}/accounts/{account}/debits", self.url))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
    }

    /// A debit of `amount` from `account` under `key`: the answer, or the
    /// transport's error.
    ///
    /// # Errors
    ///
    /// What reqwest says of a request that got no answer.
    pub async fn try_debit(
        &self,
        account: &str,
        key: &str,
        amount: u64,
    ) -> reqwest::Result<reqwest::Response> {
        self.try_debit_body(account, key, &format!(r#"{{"amount":{amount}}}"#))
            .await
    }

    /// A debit of `amount` from `account` under `key`, answered.
    pub async fn debit(&self, account: &str, key: &str, amount: u64) -> reqwest::Response {
        self.try_debit(account, key, amount)
            .await
            .unwrap_or_else(|e| panic!("debit {key} got no answer: {e}"))
    }

    /// `body` sent as a debit of `account` under `key`, answered.
    pub async fn debit_body(&self, account: &str, key: &str, body: &str) -> reqwest::Response {
        self.try_debit_body(account, key, body)
            .await
            .unwrap_or_else(|e| panic!("debit {key} got no answer: {e}"))
    }

    /// A debit of `amount` from `account` under `key`: its status and its
    /// body as JSON (`null` if it is not JSON), or the transport's error.
    ///
    /// # Errors
    ///
    /// What reqwest says of a request that got no answer.
    pub async fn try_debit_json(
        &self,
        account: &str,
        key: &str,
        amount: u64,
    ) -> reqwest::Result<(reqwest::StatusCode, serde_json::Value)> {
        let answer = self.try_debit(account, key, amount).await?;
        let status = answer.status();
        Ok((status, answer.json().await.unwrap_or_default()))
    }

    /// `account`'s balance, as the instance answers it.
    pub async fn balance(&self, account: &str) -> u64 {
        let answer = self
            .http
            .get(format!("{}/accounts/{account}", self.url))
            .send()
            .await
            .unwrap_or_else(|e| panic!("balance of {account} got no answer: {e}"));
        let account_json: serde_json::Value = answer
            .json()
            .await
            .unwrap_or_else(|e| panic!("balance of {account} is not JSON: {e}"));
        account_json["balance"]
            .as_u64()
            .unwrap_or_else(|| panic!("no balance in {account_json}"))
    }

    /// `account`'s balance once the instance answers (it may be starting,
    /// or failing over), asking at most until `within` has passed.
    pub async fn balance_when_up(&self, account: &str, within: Duration) -> u64 {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let answer = self
                .http
                .get(format!("{}/accounts/{account}", self.url))
                .send()
                .await;
            if let Ok(answer) = answer {
                if answer.status().is_success() {
                    if let Ok(json) = answer.json::<serde_json::Value>().await {
                        if let Some(balance) = json["balance"].as_u64() {
                            return balance;
                        }
                    }
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} never answered {account}'s balance",
                self.url
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
