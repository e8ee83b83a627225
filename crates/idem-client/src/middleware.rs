//! `IdempotentRetries`: one key per logical request, minted before the
//! first attempt and sent with every retry.

use std::time::Duration;

use http::Extensions;
use reqwest::header::{HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio::time::Instant;

use idem_core::Claim;

use crate::call_failed::{never_reached, CallFailed};
use crate::call_report::CallReport;
use crate::key::{CallSite, Key, KeyMint};
use crate::policy::{Attempt, NextAttempt, RetryPolicy};

/// A `reqwest-middleware` middleware that makes a caller's retries safe.
///
/// For a request whose method it covers (default `POST` and `PATCH`), it
/// takes the request's key (an `Idempotency-Key` header already set, or a
/// [`Key`] extension), or mints one ([`KeyMint`]), once, before the first
/// attempt; then it sends the request and retries it with the same key as
/// its [`RetryPolicy`] says. The response carries an [`CallReport`] in
/// its extensions: the key, the attempts, and whether it is a replay.
/// Requests with other methods and no key pass through, sent once.
///
/// A request whose body cannot be cloned (a stream) is sent once, with its
/// key: it cannot be sent again.
///
/// ```no_run
/// use idem_client::{IdempotentRetries, ResponseExt};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(IdempotentRetries::new())
///     .build();
/// let answer = client
///     .post("http://127.0.0.1:3000/accounts/acct-1/debits")
///     .header("content-type", "application/json")
///     .body(r#"{"amount":100}"#)
///     .send()
///     .await?;
/// let how = answer.call_report().cloned();
/// let debit = answer.error_for_problem().await?;
/// println!("{:?} after {:?}", debit.status(), how);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct IdempotentRetries {
    header: HeaderName,
    replayed: HeaderName,
    methods: Vec<Method>,
    mint: KeyMint,
    policy: RetryPolicy,
    propagate: bool,
}

impl Default for IdempotentRetries {
    fn default() -> Self {
        Self::new()
    }
}

impl IdempotentRetries {
    /// Keys in `Idempotency-Key` for `POST` and `PATCH`, random UUIDs, the
    /// default [`RetryPolicy`].
    pub fn new() -> Self {
        Self {
            header: HeaderName::from_static(idem_http::IDEMPOTENCY_KEY),
            replayed: HeaderName::from_static(idem_http::IDEMPOTENT_REPLAYED),
            methods: vec![Method::POST, Method::PATCH],
            mint: KeyMint::default(),
            policy: RetryPolicy::default(),
            propagate: false,
        }
    }

    /// The header that carries the key (Stripe's is `Idempotency-Key` too).
    #[must_use]
    pub fn header(mut self, name: HeaderName) -> Self {
        self.header = name;
        self
    }

    /// The header by which the server marks a replay (default
    /// `Idempotent-Replayed`; some servers send `Idempotency-Replayed`): a
    /// response that carries it as `true` is reported
    /// [`replayed`](crate::CallReport::replayed).
    #[must_use]
    pub fn replay_header(mut self, name: HeaderName) -> Self {
        self.replayed = name;
        self
    }

    /// The methods that get a key minted when they have none.
    #[must_use]
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = methods.into_iter().collect();
        self
    }

    /// How keys are minted.
    #[must_use]
    pub fn mint(mut self, mint: KeyMint) -> Self {
        self.mint = mint;
        self
    }

    /// Which attempts are retried, and how.
    #[must_use]
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether a request sent from inside an idempotent operation (an
    /// idem handler, an `Engine::run` operation) carries a key derived from
    /// the operation's claim ([`Claim::downstream_key`]) and the request's
    /// [`CallSite`], instead of a new one (default `false`). A takeover that
    /// runs the operation again, after its first holder stalled past its
    /// lease, then repeats its downstream calls under the same keys, and
    /// the downstream services answer them with their first outcome.
    #[must_use]
    pub fn propagate(mut self, propagate: bool) -> Self {
        self.propagate = propagate;
        self
    }

    /// The key for `req`, and whether it was derived from the current
    /// claim: its own header, its [`Key`] extension, a key derived from
    /// the current claim, or a new one, for a covered method or a named
    /// [`CallSite`]; `None` for a request to pass through.
    fn key_for(&self, req: &Request, extensions: &Extensions) -> Option<(String, bool)> {
        if let Some(own) = req.headers().get(&self.header) {
            return own.to_str().ok().map(|k| (k.to_owned(), false));
        }
        if let Some(Key(key)) = extensions.get::<Key>() {
            return Some((key.clone(), false));
        }
        let site = extensions.get::<CallSite>();
        if !self.methods.contains(req.method()) && site.is_none() {
            return None;
        }
        if self.propagate {
            if let Some(claim) = Claim::current() {
                let site = site.map_or_else(
                    || format!("{} {}", req.method(), req.url()),
                    |s| s.0.clone(),
                );
                let key = claim.downstream_key(&site);
                tracing::debug!(target: "idem", record = %claim.record_id(), call_site = %site, key = %key.as_str(), "downstream call keyed from the claim");
                return Some((key.as_str().to_owned(), true));
            }
        }
        Some((self.mint.mint(), false))
    }
}

/// What an attempt gave, for the policy.
fn attempt_of(result: &reqwest_middleware::Result<Response>) -> Option<Attempt> {
    match result {
        Ok(response) => Some(Attempt::Answer {
            status: response.status().as_u16(),
            retry_after: response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs),
        }),
        // No answer: the request may or may not have run.
        Err(reqwest_middleware::Error::Reqwest(e))
            if e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() =>
        {
            Some(Attempt::NoAnswer)
        }
        // A request that cannot be built, a redirect loop, another
        // middleware's error: sending it again would not help.
        Err(_) => None,
    }
}

#[async_trait::async_trait]
impl Middleware for IdempotentRetries {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let Some((key, derived)) = self.key_for(&req, extensions) else {
            return next.run(req, extensions).await;
        };
        let Ok(value) = HeaderValue::from_str(&key) else {
            return Err(reqwest_middleware::Error::Middleware(anyhow_error(
                format!("the idempotency key {key:?} cannot be sent as a header value"),
            )));
        };
        req.headers_mut().insert(self.header.clone(), value);
        let started = Instant::now();
        let mut made = 0u32;
        let mut may_have_run = false;
        loop {
            made += 1;
            let Some(this) = req.try_clone() else {
                // A streamed body is sent once.
                let result = next.run(req, extensions).await;
                let may_have_run = may_have_run || may_have_run_by(&result);
                return annotate(result, key, derived, (made, may_have_run), &self.replayed);
            };
            let result = next.clone().run(this, extensions).await;
            may_have_run = may_have_run || may_have_run_by(&result);
            let decision = match attempt_of(&result) {
                Some(attempt) => {
                    self.policy
                        .decide(made, started.elapsed(), attempt, rand::random::<f64>())
                }
                None => NextAttempt::Stop,
            };
            match decision {
                NextAttempt::Stop => {
                    return annotate(result, key, derived, (made, may_have_run), &self.replayed)
                }
                NextAttempt::RetryAfter(pause) => {
                    tracing::debug!(target: "idem", key = %key, attempt = made, pause_ms = pause.as_millis(), "retrying with the same idempotency key");
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// Whether the attempt that gave `result` may have run on the server: no
/// answer, unless its connection was refused (or the request could not be
/// built); or an answer saying it runs or failed while running.
fn may_have_run_by(result: &reqwest_middleware::Result<Response>) -> bool {
    match result {
        Ok(response) => {
            let status = response.status().as_u16();
            matches!(status, 409 | 425) || (status >= 500 && status != 503)
        }
        Err(reqwest_middleware::Error::Reqwest(e)) => {
            !(e.is_connect() || e.is_builder() || never_reached(e))
        }
        Err(reqwest_middleware::Error::Middleware(_)) => true,
    }
}

/// Adds how the logical request went to its response, or to its error
/// ([`CallFailed`]: the key, the attempts, whether it may have run).
fn annotate(
    result: reqwest_middleware::Result<Response>,
    key: String,
    derived: bool,
    (attempts, may_have_run): (u32, bool),
    replayed: &HeaderName,
) -> reqwest_middleware::Result<Response> {
    match result {
        Ok(mut response) => {
            let how = CallReport::of(key, derived, attempts, response.headers(), replayed);
            response.extensions_mut().insert(how);
            Ok(response)
        }
        Err(e) => {
            let cause: Box<dyn std::error::Error + Send + Sync> = match e {
                reqwest_middleware::Error::Reqwest(e) => Box::new(e),
                reqwest_middleware::Error::Middleware(e) => e.into(),
            };
            let failed = CallFailed::new(key, attempts, may_have_run, cause);
            Err(reqwest_middleware::Error::Middleware(anyhow::Error::new(
                failed,
            )))
        }
    }
}

fn anyhow_error(message: String) -> anyhow::Error {
    anyhow::Error::msg(message)
}
