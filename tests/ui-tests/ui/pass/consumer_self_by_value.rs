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
struct Job { engine: Engine, msg: OrderPlaced }

impl Job {
    #[idempotent(engine = self.engine.clone(), key = self.msg.id.clone())]
    async fn run(self) -> Result<String, ShipError> {
        Err(ShipError::CarrierDown).or(Ok(self.msg.sku))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let job = Job { engine: Engine::new(MemoryStore::new()), msg: order() };
    let _ = job.run().await;
}
