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

struct Consumer {
    engine: Engine,
}

impl Consumer {
    #[idempotent(engine = self.engine, key = msg.id)]
    fn ship(&self, msg: Msg) -> Result<u32, ShipError> {
        let _ = msg;
        Ok(1)
    }
}

fn main() {}
