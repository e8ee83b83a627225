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
struct Worker { engine: Engine, shipped: u32 }

impl Worker {
    #[idempotent(engine = self.engine.clone(), key = msg.id)]
    async fn ship(&mut self, msg: &OrderPlaced) -> Result<u32, ShipError> {
        if msg.sku.is_empty() {
            return Err(ShipError::OutOfStock);
        }
        self.shipped += 1;
        Ok(self.shipped)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut w = Worker { engine: Engine::new(MemoryStore::new()), shipped: 0 };
    let _ = w.ship(&order()).await;
}
