use axum::Json;
use idem_axum::idempotent;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Msg {
    id: String,
}

struct Consumer;

impl Consumer {
    #[idempotent(key = msg.id)]
    async fn handle(&self, Json(msg): Json<Msg>) -> String {
        msg.id
    }
}

fn main() {}
