//! A method taking `&self`: the engine from a field, a parameter skipped,
//! the claim bound for its fencing token.

use std::sync::Arc;

use idem_core::{idempotent, Engine, Failure};
use serde::{Deserialize, Serialize};

struct Consumer {
    engine: Arc<Engine>,
    carrier: Carrier,
}

struct Carrier;

#[derive(Serialize, Deserialize)]
struct Msg {
    id: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Down;

impl Failure for Down {
    fn is_final(&self) -> bool {
        false
    }
}

impl Consumer {
    #[idempotent(engine = self.engine, key = msg.id, skip(carrier), claim = claim, name = "ship")]
    async fn handle(&self, msg: &Msg, carrier: &Carrier) -> Result<u64, Down> {
        let _ = (carrier, &self.carrier);
        Ok(msg.id + claim.fencing_token().0)
    }
}

fn main() {
    let _ = Consumer::handle;
}
