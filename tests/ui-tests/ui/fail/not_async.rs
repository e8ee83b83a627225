use idem_core::{idempotent, Engine, Failure};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Msg {
    id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ShipError;

impl Failure for ShipError {
    fn is_final(&self) -> bool {
        false
    }
}

#[idempotent(engine = engine, key = msg.id)]
fn ship(engine: &Engine, msg: Msg) -> Result<u32, ShipError> {
    let _ = (engine, msg);
    Ok(1)
}

fn main() {}
