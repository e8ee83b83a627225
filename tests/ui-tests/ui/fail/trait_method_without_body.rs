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

trait Shipper {
    #[idempotent(engine = self.engine(), key = msg.id)]
    async fn ship(&self, msg: Msg) -> Result<u32, ShipError>;
    fn engine(&self) -> &Engine;
}

fn main() {}
