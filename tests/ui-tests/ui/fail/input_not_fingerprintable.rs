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

struct Pool;

#[idempotent(engine = engine, key = msg.id)]
async fn ship(engine: &Engine, pool: &Pool, msg: Msg) -> Result<u32, ShipError> {
    let _ = (engine, pool, msg);
    Ok(1)
}

fn main() {}
