use idem_core::{idempotent, Engine, MemoryStore, Never};

#[idempotent(engine = engine, key = id, ttl = "30d")]
async fn archive(engine: &Engine, id: u64) -> Result<String, Never> {
    Ok(format!("archived {id}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let engine = Engine::new(MemoryStore::new());
    let _ = archive(&engine, 42).await;
}
