//! A free async function: key and engine are expressions over the arguments.

use idem_core::{idempotent, Engine, Error, Failure, MemoryStore, Ran};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct OrderPlaced {
    id: String,
    tenant: String,
    sku: String,
}

#[derive(Serialize, Deserialize)]
struct Shipment {
    parcel: String,
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

#[idempotent(engine = engine, key = msg.id, ttl = "7d", scope = "tenant", on_conflict = "reject", crate = "::idem_core")]
async fn on_order_placed(engine: &Engine, tenant: &str, msg: OrderPlaced) -> Result<Shipment, ShipError> {
    if msg.sku.is_empty() {
        return Err(ShipError::OutOfStock);
    }
    let _ = tenant;
    Ok(Shipment { parcel: format!("parcel-{}", msg.id) })
}

async fn caller(engine: &Engine, msg: OrderPlaced) -> Result<Ran<Shipment>, Error<ShipError>> {
    on_order_placed(engine, "acme", msg).await
}

fn main() {
    let _ = caller;
    let _ = Engine::new(MemoryStore::new());
    let _ = ShipError::CarrierDown;
}
