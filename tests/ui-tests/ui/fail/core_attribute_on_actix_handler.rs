// An actix-web handler given idem-core's attribute, which makes functions
// that are not handlers.
use actix_web::web::{Data, Path};
use actix_web::{HttpResponse, Responder};
use idem_core::idempotent;

struct Ledger;

#[idempotent]
async fn refund(_ledger: Data<Ledger>, account: Path<String>) -> impl Responder {
    HttpResponse::Ok().body(account.into_inner())
}

fn main() {}
