//! A consumer function with lifetimes, generics and a parameter attribute.
use idem_core::{idempotent, Engine, Failure, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct NotDelivered;

impl Failure for NotDelivered {
    fn is_final(&self) -> bool {
        true
    }
}

#[idempotent(engine = engine, key = id, skip(log))]
async fn notify<'a, M>(
    engine: &'a Engine,
    id: &'a str,
    message: &'a M,
    #[allow(unused_variables)] log: &'a mut Vec<String>,
) -> Result<String, NotDelivered>
where
    M: Serialize + Sync,
{
    let _ = message;
    Ok(format!("sent {id}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let engine = Engine::new(MemoryStore::new());
    let mut log = Vec::new();
    let _ = notify(&engine, "n-1", &("hello", 3), &mut log).await;
}
