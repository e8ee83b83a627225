use actix_web::web::{Json, Path};
use idem_actix::idempotent;

#[idempotent(skip(note))]
async fn debit(account: Path<String>, note: Json<String>) -> String {
    format!("{account} {note}")
}

fn main() {}
