// `skip` written once per parameter, as some attributes allow.
use idem_core::{idempotent, Engine, Failure};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Msg {
    id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct SendError;

impl Failure for SendError {
    fn is_final(&self) -> bool {
        false
    }
}

struct Mailer;
struct Clock;

#[idempotent(engine = engine, key = msg.id, skip(mailer), skip(clock))]
async fn send(engine: &Engine, mailer: &Mailer, clock: &Clock, msg: Msg) -> Result<u32, SendError> {
    let _ = (engine, mailer, clock, msg);
    Ok(1)
}

fn main() {}
