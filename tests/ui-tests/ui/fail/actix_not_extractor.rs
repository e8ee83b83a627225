use actix_web::web::Path;
use idem_actix::idempotent;

struct Receipt;

#[idempotent]
async fn debit(account: Path<String>, receipt: Receipt) -> String {
    let _ = receipt;
    account.into_inner()
}

fn main() {}
