use idem_core::{idempotent, Engine, Failure, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
struct OrderPlaced {
    id: String,
    sku: String,
}

#[derive(Debug, Serialize, Deserialize)]
enum ShipError {
    OutOfStock,
    CarrierDown,
}

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        matches!(self, ShipError::OutOfStock)
    }
}

fn order() -> OrderPlaced {
    OrderPlaced { id: "msg-1".into(), sku: "tea".into() }
}
use std::sync::Arc;

struct Worker { engine: Engine }

impl Worker {
    #[idempotent(engine = self.engine, key = msg.id)]
    async fn ship(self: Arc<Self>, msg: OrderPlaced) -> Result<String, ShipError> {
        Ok(format!("parcel for {}", msg.sku))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let w = Arc::new(Worker { engine: Engine::new(MemoryStore::new()) });
    let _ = w.ship(order()).await;
}
