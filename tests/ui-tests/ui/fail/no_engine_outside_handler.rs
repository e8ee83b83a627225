use idem_core::{idempotent, Failure};
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

#[idempotent(key = msg.id)]
async fn ship(msg: Msg) -> Result<u32, ShipError> {
    let _ = msg;
    Ok(1)
}

fn main() {}
