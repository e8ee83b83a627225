// An actix-web handler given idem-axum's attribute.
use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use idem_axum::idempotent;
use serde::Deserialize;

struct Fees(u64);

#[derive(Deserialize)]
struct Debit {
    amount: u64,
}

#[idempotent]
async fn debit(fees: web::Data<Fees>, Json(req): Json<Debit>) -> HttpResponse {
    HttpResponse::Created().body(format!("{} less {}", req.amount, fees.0))
}

fn main() {}
