//! The HTTP semantics table (`http_semantics`) through idem-actix's
//! `Idempotency` middleware on actix-web: the same rows, over a real socket,
//! as idem-axum's.

mod http_semantics;

use actix_web::http::header;
use actix_web::web::{self, Bytes, Data};
use actix_web::{App, HttpResponse};
use http_semantics::{echo_body, Runs, SLOW};
use idem_actix::{Idempotency, RecordPolicy};
use idem_core::{Engine, IgnoredFields, Scope};
use idem_tests::serve_actix;

async fn echo(runs: Data<Runs>, body: Bytes) -> HttpResponse {
    let n = runs.next();
    HttpResponse::Created()
        .append_header((header::SET_COOKIE, "session=abc; Path=/"))
        .append_header((header::SET_COOKIE, "theme=dark; Path=/"))
        .append_header((header::LINK, "</a>; rel=\"next\""))
        .append_header((header::LINK, "</b>; rel=\"prev\""))
        .insert_header((header::LOCATION, "/things/1"))
        .insert_header((header::CONTENT_TYPE, "application/octet-stream"))
        .insert_header(("x-run", n))
        .body(echo_body(&body, n))
}

async fn slow(runs: Data<Runs>) -> HttpResponse {
    runs.next();
    actix_web::rt::time::sleep(SLOW).await;
    HttpResponse::Ok().body("slow done")
}

async fn flaky(runs: Data<Runs>) -> HttpResponse {
    let n = runs.next();
    HttpResponse::ServiceUnavailable().body(format!("attempt {n} failed"))
}

async fn big(runs: Data<Runs>) -> HttpResponse {
    runs.next();
    HttpResponse::Ok().body(vec![b'x'; 10_000])
}

fn start(
    engine: Engine,
    runs: Runs,
    record: RecordPolicy,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>> {
    let idempotency = Idempotency::new(engine)
        .max_request_body(1024)
        .ignore_body_fields(IgnoredFields::new(["/sent_at"]).expect("pointer"))
        .max_response_body(4096)
        .record(record)
        .scope(|req| {
            Ok(req
                .headers()
                .get("x-tenant")
                .and_then(|v| v.to_str().ok())
                .map_or_else(Scope::global, Scope::new))
        });
    let url = serve_actix(move || {
        App::new()
            .app_data(Data::new(runs.clone()))
            .wrap(idempotency.clone())
            .route("/echo", web::post().to(echo))
            .route("/echo", web::get().to(|| async { "plain get" }))
            .route("/slow", web::post().to(slow))
            .route("/flaky", web::post().to(flaky))
            .route("/big", web::post().to(big))
    });
    Box::pin(std::future::ready(url))
}

table!(http_semantics::Adapter {
    start,
    keeps_header_order: false,
    drops_on_fin: false,
});
