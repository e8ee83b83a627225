use actix_web::web::Path;
use idem_actix::idempotent;

struct Service;

impl Service {
    #[idempotent]
    async fn debit(&self, account: Path<String>) -> String {
        account.into_inner()
    }
}

fn main() {}
