//! The axum layer and the `#[idempotent]` attribute under AWS Lambda,
//! unchanged: `lambda_http::run` serves the same router a server would.
//! `POST /v1/charges` is covered by the attribute (keys per `x-api-key`),
//! `POST /v1/refunds` by `IdempotencyLayer`. Records in DynamoDB when
//! `IDEM_TABLE` names a table (made if missing; `DYNAMODB_ENDPOINT`,
//! `AWS_REGION`, `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` as in
//! `orders_sqs`), else in memory. Run by Lambda (or anything that speaks
//! its runtime API at `AWS_LAMBDA_RUNTIME_API`).

use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::{idempotent, IdempotencyLayer};
use idem_core::{Engine, MemoryStore};
use idem_dynamodb::aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use idem_dynamodb::aws_sdk_dynamodb::{Client, Config};
use idem_dynamodb::DynamoStore;
use serde::{Deserialize, Serialize};

/// Ids of this instance's charges and refunds: a retry answered with a new
/// id would show that it ran again.
static NEXT: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Serialize, Deserialize)]
struct Charge {
    amount: u64,
}

// Runs once per key and API key, however often API Gateway's clients retry.
#[idempotent(ttl = "24h", scope = header("x-api-key"))]
async fn charge(State(_app): State<App>, Json(charge): Json<Charge>) -> Response {
    let id = format!("ch_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let receipt = serde_json::json!({"object": "charge", "id": id, "amount": charge.amount});
    (StatusCode::CREATED, Json(receipt)).into_response()
}

async fn refund(Json(charge): Json<Charge>) -> Response {
    let id = format!("re_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let receipt = serde_json::json!({"object": "refund", "id": id, "amount": charge.amount});
    (StatusCode::CREATED, Json(receipt)).into_response()
}

/// The engine: records in the DynamoDB table `IDEM_TABLE`, or in memory.
async fn engine() -> Result<Engine, Box<dyn std::error::Error + Send + Sync>> {
    let Ok(table) = std::env::var("IDEM_TABLE") else {
        return Ok(Engine::new(MemoryStore::new()));
    };
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let mut config = Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(var("AWS_REGION", "us-east-1")))
        .credentials_provider(Credentials::new(
            var("AWS_ACCESS_KEY_ID", "test"),
            var("AWS_SECRET_ACCESS_KEY", "test"),
            std::env::var("AWS_SESSION_TOKEN").ok(),
            None,
            "environment",
        ));
    if let Ok(endpoint) = std::env::var("DYNAMODB_ENDPOINT") {
        config = config.endpoint_url(endpoint);
    }
    let client = Client::from_conf(config.build());
    idem_dynamodb::create_table(&client, &table).await?;
    Ok(Engine::new(DynamoStore::new(client, &table)))
}

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let engine = engine().await?;
    let app = Router::new()
        .route("/v1/charges", post(charge))
        .route(
            "/v1/refunds",
            post(refund).layer(IdempotencyLayer::new(engine.clone())),
        )
        .with_state(App { engine });
    lambda_http::run(app).await
}
