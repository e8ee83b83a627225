use idem_core::{idempotent, Engine, Never};

struct Consumer {
    engine: Engine,
}

impl Consumer {
    #[idempotent(engine = self.engine, key = id, scope = header("x-tenant"))]
    async fn handle(&self, id: &str) -> Result<u32, Never> {
        Ok(id.len() as u32)
    }
}

fn main() {}
