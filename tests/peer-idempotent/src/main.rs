//! The payments debit route behind the `idempotent` crate's
//! `IdempotencyLayer`, as its README builds it: `peer-idempotent memory` or
//! `peer-idempotent redis <url> <prefix>`. It binds 127.0.0.1 on a free port,
//! prints `listening on http://127.0.0.1:<port>` and serves until killed.
//!
//! The route is idem's payments debit (`POST /accounts/{id}/debits` with
//! `{"amount": N}`): balances in this process's memory, a 201 JSON receipt,
//! keys scoped by the account, records kept 10 minutes on Redis (the redis
//! pair's TTL) and a day in memory (the memory pair's).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use idempotent::middleware::IdempotencyLayer;
use idempotent::IdempotencyKey;
use serde::{Deserialize, Serialize};

const OPENING_BALANCE: u64 = 10_000;

#[derive(Clone, Default)]
struct Balances(Arc<Mutex<HashMap<String, u64>>>);

#[derive(Deserialize)]
struct Debit {
    amount: u64,
}

#[derive(Serialize)]
struct Receipt {
    debit_id: String,
    account: String,
    amount: u64,
    balance: u64,
}

async fn debit(
    State(balances): State<Balances>,
    key: IdempotencyKey,
    Path(account): Path<String>,
    Json(req): Json<Debit>,
) -> Response {
    let mut all = balances.0.lock().unwrap_or_else(PoisonError::into_inner);
    let balance = all.entry(account.clone()).or_insert(OPENING_BALANCE);
    if *balance < req.amount {
        return (StatusCode::UNPROCESSABLE_ENTITY, "insufficient funds").into_response();
    }
    *balance -= req.amount;
    let receipt = Receipt {
        debit_id: format!("dbt_{key}"),
        account,
        amount: req.amount,
        balance: *balance,
    };
    (StatusCode::CREATED, Json(receipt)).into_response()
}

/// The account in `/accounts/{id}/debits`: the key's scope.
fn account(parts: &axum::http::request::Parts) -> Option<String> {
    parts.uri.path().split('/').nth(2).map(String::from)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let routes = Router::new()
        .route("/accounts/{id}/debits", post(debit))
        .with_state(Balances::default());
    let app = match args.first().map(String::as_str) {
        Some("memory") => {
            let store = idempotent::memory::MemoryStore::builder().try_build()?;
            let layer = IdempotencyLayer::new(store).completed_ttl(Duration::from_secs(24 * 3600));
            routes.layer(layer.scope(account))
        }
        Some("redis") => {
            let url = args.get(1).ok_or("peer-idempotent redis <url> <prefix>")?;
            let prefix = args.get(2).ok_or("peer-idempotent redis <url> <prefix>")?;
            let store = idempotent::valkey::ValkeyStore::with_url(url.as_str())
                .prefix(prefix.as_str())
                .try_build()
                .await?;
            let layer = IdempotencyLayer::new(store).completed_ttl(Duration::from_secs(600));
            routes.layer(layer.scope(account))
        }
        _ => return Err("usage: peer-idempotent memory | redis <url> <prefix>".into()),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
