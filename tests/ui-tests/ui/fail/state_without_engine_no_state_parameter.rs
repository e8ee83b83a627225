//! A handler that takes no `State` is told about the router's state where
//! it is routed.
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use serde::{Deserialize, Serialize};

#[derive(Clone)]
struct App {
    region: String,
}

#[derive(Serialize, Deserialize)]
struct Order {
    sku: String,
}

#[idempotent]
async fn order(Json(req): Json<Order>) -> String {
    req.sku
}

fn main() {
    let _: Router = Router::new().route("/orders", post(order)).with_state(App {
        region: "eu".into(),
    });
}
