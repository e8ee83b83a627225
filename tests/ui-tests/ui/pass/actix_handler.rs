//! actix-web handlers: key from the header (or from the body), engine from
//! the app data, scope from the path, the claim bound, every usual return.

use actix_web::http::StatusCode;
use actix_web::web::{self, Data, Json, Path, Query};
use actix_web::{App, HttpRequest, HttpResponse, Responder};
use idem_actix::idempotent;
use idem_core::{Engine, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Debit {
    amount: u64,
}

#[derive(Serialize)]
struct Receipt {
    amount: u64,
    token: String,
}

struct Fees(u64);

#[idempotent(ttl = "24h", lease = "30s", scope = "account", on_conflict = "wait(5s)", name = "debit-v1", claim = claim)]
async fn debit(
    fees: Data<Fees>,
    account: Path<String>,
    Json(req): Json<Debit>,
) -> (Json<Receipt>, StatusCode) {
    let _ = (&fees.0, account.as_str());
    (
        Json(Receipt {
            amount: req.amount,
            token: claim.fencing_token().to_string(),
        }),
        StatusCode::CREATED,
    )
}

#[derive(Deserialize)]
struct Event {
    id: String,
}

/// The key is the event's own id.
#[idempotent(key = event.id)]
async fn webhook(event: Json<Event>) -> HttpResponse {
    HttpResponse::Ok().body(event.id.clone())
}

#[derive(Deserialize)]
struct Page {
    size: u32,
}

#[idempotent]
async fn export(req: HttpRequest, page: Query<Page>) -> impl Responder {
    format!("{} {}", req.path(), page.size)
}

#[idempotent]
async fn ping() -> &'static str {
    "pong"
}

fn main() {
    let _app = App::new()
        .app_data(Engine::new(MemoryStore::new()))
        .app_data(Data::new(Fees(1)))
        .route("/accounts/{account}/debits", web::post().to(debit))
        .route("/webhooks", web::post().to(webhook))
        .route("/exports", web::post().to(export))
        .route("/ping", web::post().to(ping));
}
