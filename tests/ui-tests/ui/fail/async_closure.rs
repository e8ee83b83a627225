// The attribute on an async closure handed to a router.
use axum::routing::post;
use axum::Router;
use idem_axum::idempotent;

fn main() {
    let _: Router = Router::new().route(
        "/orders",
        post(#[idempotent] async |body: String| body),
    );
}
