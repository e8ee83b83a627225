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
/// # Safety
/// `raw` must point to a live byte.
#[idempotent(engine = engine, key = msg.id, skip(raw))]
async unsafe fn ship(engine: &Engine, msg: OrderPlaced, raw: *const u8) -> Result<u8, ShipError> {
    let _ = msg;
    Ok(unsafe { *raw })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let engine = Engine::new(MemoryStore::new());
    let byte = 7u8;
    let _ = unsafe { ship(&engine, order(), &byte) }.await;
}
