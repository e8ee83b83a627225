//! A handler that takes a part of the router state (`State<Pool>`), the
//! engine being another part: the engine is found in the router's state.
use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Clone)]
struct Pool {
    name: &'static str,
}

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
    pool: Pool,
}

#[derive(Serialize, Deserialize)]
struct Refund {
    payment: String,
}

#[idempotent(ttl = "24h")]
async fn refund(State(pool): State<Pool>, Json(req): Json<Refund>) -> String {
    format!("refunded {} via {}", req.payment, pool.name)
}

fn main() {
    let _: Router = Router::new()
        .route("/refunds", post(refund))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
            pool: Pool { name: "main" },
        });
}
