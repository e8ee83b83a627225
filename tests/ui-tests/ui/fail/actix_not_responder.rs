use actix_web::web::Path;
use idem_actix::idempotent;

struct Receipt {
    amount: u64,
}

#[idempotent]
async fn debit(account: Path<String>) -> Receipt {
    let _ = account;
    Receipt { amount: 1 }
}

fn main() {}
