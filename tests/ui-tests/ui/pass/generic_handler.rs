//! A generic handler with a where clause, routed for one type.
use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::{Json, Router};
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Serialize, Deserialize)]
struct Widget {
    name: String,
}

trait Named {
    fn name(&self) -> String;
}

impl Named for Widget {
    fn name(&self) -> String {
        self.name.clone()
    }
}

#[idempotent(name = "create")]
async fn create<T>(State(_app): State<App>, Json(item): Json<T>) -> String
where
    T: Named + Serialize + DeserializeOwned + Send + 'static,
{
    item.name()
}

fn main() {
    let _: Router = Router::new()
        .route("/widgets", post(create::<Widget>))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
        });
}
