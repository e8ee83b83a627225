use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::Router;
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

fn app() -> App {
    App { engine: Engine::new(MemoryStore::new()) }
}
use axum::body::Bytes;
use axum::http::HeaderMap;

fn event_id(headers: &HeaderMap) -> String {
    headers.get("stripe-event-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A webhook receiver: the raw body (for its signature), deduplicated by the
/// sender's event id rather than an Idempotency-Key header.
#[idempotent(key = event_id(&headers), ttl = "3d", skip(headers))]
async fn stripe_webhook(State(_app): State<App>, headers: HeaderMap, body: Bytes) -> &'static str {
    let _ = (headers, body);
    "ok"
}

fn main() {
    let _: Router = Router::new().route("/webhooks/stripe", post(stripe_webhook)).with_state(app());
}
