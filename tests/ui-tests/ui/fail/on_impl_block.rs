use idem_axum::idempotent;

struct Consumer;

#[idempotent]
impl Consumer {
    async fn handle(&self) {}
}

fn main() {}
