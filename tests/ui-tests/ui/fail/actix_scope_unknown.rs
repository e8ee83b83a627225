use actix_web::web::Path;
use idem_actix::idempotent;

#[idempotent(scope = "customer")]
async fn debit(account: Path<String>) -> String {
    account.into_inner()
}

fn main() {}
