//! The axum layer and the `#[idempotent]` attribute under AWS Lambda,
//! unchanged (`examples/lambda`, served by `lambda_http`): two instances of
//! the function, each a process polling Lambda's runtime API (emulated by
//! `idem_tests::lambda_runtime_api`), with records in DynamoDB (moto's
//! server). API Gateway's events (HTTP API, payload 2.0) with an
//! `Idempotency-Key`: a retry that lands on the other instance gets the
//! first answer, byte for byte, and the key reused for another amount is
//! refused.

use std::process::{Child, Command, Stdio};

use idem_tests::lambda_runtime_api::LambdaRuntimeApi;
use idem_tests::{dynamodb_url, example_binary, unique_table_name};

/// An API Gateway HTTP API event (payload format 2.0) for a POST.
fn post(path: &str, key: &str, api_key: &str, body: &str) -> serde_json::Value {
    serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "idempotency-key": key,
            "x-api-key": api_key
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "api",
            "http": {
                "method": "POST",
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "idem-tests"
            },
            "requestId": "request",
            "routeKey": "$default",
            "stage": "$default",
            "time": "05/Dec/2026:12:00:00 +0000",
            "timeEpoch": 1_796_472_000_000_u64
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// An instance of the function, stopped when dropped.
struct Instance(Child);

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An instance of the function on `api`, its records in `table`.
fn instance(api: &LambdaRuntimeApi, table: &str) -> Instance {
    let child = Command::new(example_binary("lambda_http"))
        .envs(api.env())
        .env("IDEM_TABLE", table)
        .env("DYNAMODB_ENDPOINT", dynamodb_url())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the function");
    Instance(child)
}

fn status(answer: &serde_json::Value) -> u64 {
    answer["statusCode"].as_u64().unwrap_or(0)
}

fn header<'a>(answer: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    answer["headers"]
        .as_object()?
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_landing_on_another_lambda_instance_gets_the_first_answer() {
    // Two instances, each behind a runtime API of its own, so that the
    // retry is sure to reach the other one.
    let (one, other) = (
        LambdaRuntimeApi::start().await,
        LambdaRuntimeApi::start().await,
    );
    let table = unique_table_name("lambda");
    let _instances = [instance(&one, &table), instance(&other, &table)];
    let charge = post("/v1/charges", "charge-1", "acme", r#"{"amount":700}"#);
    let answer = one.invoke(charge.clone()).await.expect("the charge");
    assert_eq!(status(&answer), 201, "{answer}");
    assert_eq!(header(&answer, "idempotent-replayed"), None);
    let again = other.invoke(charge).await.expect("the retry");
    assert_eq!(status(&again), 201, "{again}");
    assert_eq!(
        again["body"], answer["body"],
        "the first answer, byte for byte"
    );
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    // Another amount under the key is refused, and charges nothing.
    let reused = other
        .invoke(post("/v1/charges", "charge-1", "acme", r#"{"amount":900}"#))
        .await
        .expect("the reuse");
    assert_eq!(status(&reused), 422, "{reused}");
    // The layer's route, the same.
    let refund = post("/v1/refunds", "refund-1", "acme", r#"{"amount":50}"#);
    let refunded = one.invoke(refund.clone()).await.expect("the refund");
    assert_eq!(status(&refunded), 201, "{refunded}");
    let replayed = other.invoke(refund).await.expect("its retry");
    assert_eq!(replayed["body"], refunded["body"]);
    assert_eq!(header(&replayed, "idempotent-replayed"), Some("true"));
}
