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

#[derive(Debug, Serialize, Deserialize)]
struct PlainError;

#[idempotent(engine = engine, key = msg.id)]
async fn ship(engine: &Engine, msg: Msg) -> Result<u32, PlainError> {
    let _ = (engine, msg);
    Ok(1)
}

fn main() {}
